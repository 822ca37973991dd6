"""Broker agents (MASB BA, cellbed-broker): the node cache fed by node reports, BA<->BA sync,
candidates for SAN step 2 and initial allocation. The selection rules are pure policy in
cellbed.policy.masb.broker_select."""
