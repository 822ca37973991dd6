"""The one config loader (issue 11): unknown keys are refused naming the key, where it was and
what is allowed; unreadable files are one line naming the file."""
import pytest

from cellbed.domain.config import check_keys, dataclass_from, load_toml
from cellbed.domain.errors import InvalidArgument
from cellbed.daemon.config import NodeConfig
from cellbed.policy.masb.broker_select import BrokerParams


def test_unknown_keys_are_named_with_the_file_and_the_allowed_keys():
    with pytest.raises(InvalidArgument, match=r"^node\.toml: unknown key\(s\) colour, size; allowed: a, b$"):
        check_keys({"a": 1, "size": 2, "colour": 3}, ["b", "a"], "node.toml")
    check_keys({"a": 1}, ["a", "b"], "x")      # known keys pass


def test_dotted_style_names_the_first_bad_key_by_its_path_and_keeps_the_schema_order():
    with pytest.raises(InvalidArgument, match=r"^unknown key policy\.san\.windw_s \(allowed in policy\.san: "
                                              r"enabled, window_s\)$"):
        check_keys(["windw_s"], ["enabled", "window_s"], "policy.san", dotted="policy.san")
    with pytest.raises(InvalidArgument, match=r"^unknown key celll \(allowed in the scenario: cell, run\)$"):
        check_keys(["celll"], ["cell", "run"], "the scenario", dotted="")


def test_dataclass_from_refuses_unknown_fields_before_building():
    assert dataclass_from(BrokerParams, {"candidate_count": 7}, "params").candidate_count == 7
    with pytest.raises(InvalidArgument, match="params: unknown key"):
        dataclass_from(BrokerParams, {"candidate_cnt": 7}, "params")


@pytest.mark.parametrize("content, words", [
    (None, "no such file"), ("host = ", "not valid TOML"), (b"\xff\xfe", "not valid TOML")])
def test_unreadable_files_are_one_line_naming_the_file(tmp_path, content, words):
    path = tmp_path / "node.toml"
    if isinstance(content, str):
        path.write_text(content)
    elif content is not None:
        path.write_bytes(content)
    with pytest.raises(InvalidArgument) as e:
        load_toml(str(path))
    assert str(path) in str(e.value) and words in str(e.value) and "\n" not in str(e.value)


def test_a_node_config_with_an_unknown_key_is_refused_through_the_loader(tmp_path):
    path = tmp_path / "node.toml"
    path.write_text('host = "h1"\nhostt = "h2"\n')
    with pytest.raises(InvalidArgument, match=rf"^{path}: unknown key\(s\) hostt; allowed: "):
        NodeConfig.load(str(path))
