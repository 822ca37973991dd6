"""cellbed/cell/prom_sd.py (the cell's metrics targets and Prometheus file_sd file) and the
metrics_port keys of the node daemon's and the broker's configs."""
from __future__ import annotations

import json
import os

import pytest

from cellbed.broker.main import BrokerConfig
from cellbed.cell import prom_sd
from cellbed.daemon.config import NodeConfig, to_toml
from cellbed.domain.errors import InvalidArgument


def test_targets_are_recorded_and_written_in_the_file_sd_format(tmp_path):
    state: dict = {}
    prom_sd.add_target(state, "node", "10.231.15.11", prom_sd.NODE_METRICS_PORT, host="h1", cell="pm")
    prom_sd.add_target(state, "node", "10.231.15.12", prom_sd.NODE_METRICS_PORT, host="h2", cell="pm")
    prom_sd.add_target(state, "broker", "10.231.15.1", prom_sd.BROKER_METRICS_PORT, agent="ba1", cell="pm")
    state["metrics_targets"].append({"job": "gm", "target": "10.231.15.1:9470",
                                     "labels": {"agent": "gm1", "cell": "pm"}})
    assert state["metrics_targets"][0] == {"job": "node", "target": "10.231.15.11:9464",
                                           "labels": {"host": "h1", "cell": "pm"}}
    path = prom_sd.write_file_sd(str(tmp_path), state["metrics_targets"], "https")
    assert path == os.path.join(str(tmp_path), "prometheus-targets.json")
    assert not os.path.exists(path + ".tmp")
    with open(path) as f:
        groups = json.load(f)
    tls = {"__scheme__": "https"}
    assert groups == [
        {"targets": ["10.231.15.11:9464"], "labels": {"job": "node", "host": "h1", "cell": "pm", **tls}},
        {"targets": ["10.231.15.12:9464"], "labels": {"job": "node", "host": "h2", "cell": "pm", **tls}},
        {"targets": ["10.231.15.1:9465"], "labels": {"job": "broker", "agent": "ba1", "cell": "pm", **tls}},
        {"targets": ["10.231.15.1:9470"], "labels": {"job": "gm", "agent": "gm1", "cell": "pm", **tls}},
    ]
    for g in groups:                                   # what file_sd_configs accepts
        assert set(g) == {"targets", "labels"}
        assert all(isinstance(v, str) for v in g["labels"].values())
        assert all(t.rsplit(":", 1)[1].isdigit() for t in g["targets"])


def test_targets_with_the_same_labels_share_a_group_and_duplicates_go(tmp_path):
    t = [{"job": "lm", "target": "10.0.0.1:1", "labels": {"cell": "c"}},
         {"job": "lm", "target": "10.0.0.2:1", "labels": {"cell": "c"}},
         {"job": "lm", "target": "10.0.0.1:1", "labels": {"cell": "c"}}]
    assert prom_sd.file_sd_groups(t) == [{"targets": ["10.0.0.1:1", "10.0.0.2:1"],
                                          "labels": {"job": "lm", "cell": "c", "__scheme__": "http"}}]
    with open(prom_sd.write_file_sd(str(tmp_path), [])) as f:
        assert json.load(f) == []
    with pytest.raises(ValueError, match="scheme"):
        prom_sd.file_sd_groups(t, "ftp")


def test_an_unknown_job_is_refused():
    with pytest.raises(ValueError, match="metrics job"):
        prom_sd.add_target({}, "exporter", "10.0.0.1", 1)


def test_node_config_metrics_port(tmp_path):
    cfg = NodeConfig(host="h1", metrics_port=9464).validate()
    p = tmp_path / "node.toml"
    p.write_text(to_toml(cfg))
    assert NodeConfig.load(str(p)).metrics_port == 9464
    assert NodeConfig(host="h1").metrics_port == 0                 # off unless asked for
    for bad in (-1, 65536):
        with pytest.raises(InvalidArgument, match="metrics_port"):
            NodeConfig(host="h1", metrics_port=bad).validate()
    with pytest.raises(InvalidArgument, match="gRPC port"):
        NodeConfig(host="h1", grpc_port=9464, metrics_port=9464).validate()


def test_broker_config_metrics_port(tmp_path):
    p = tmp_path / "broker.toml"
    p.write_text('name = "ba1"\naddress = "10.231.15.1"\nmetrics_port = 9465\n')
    assert BrokerConfig.load(str(p)).metrics_port == 9465
    p.write_text('name = "ba1"\nmetrics_port = 99999\n')
    with pytest.raises(InvalidArgument, match="metrics_port"):
        BrokerConfig.load(str(p))
    p.write_text('name = "ba1"\n')
    assert BrokerConfig.load(str(p)).metrics_port == 0
