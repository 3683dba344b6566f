"""The simulator's one parameter declaration (airlink.sim.config.CellConfig): defaults,
presets checked against it, one-line errors, and the kernel's named parameter slots."""
import json
from pathlib import Path

import pytest
import yaml

import airlink.sim as S
from airlink.sim import kernel as K
from airlink.traces import AirlinkError

# The parameter table as sim/engine.py declared it before CellConfig (commit 0047fff),
# copied by hand: the reference the typed config must reproduce.
REFERENCE_DEFAULTS = {
    "description": "", "tti": "1ms", "duration": "10s", "n_users": 4, "n_subchannels": 1,
    "subchannel_hz": 200e3, "carrier_hz": 2.0e9,
    "rate_table": "lte-cqi", "table_rates": "band", "bandwidth_hz": None, "bler_slope": None,
    "bler_target": None, "payload_fraction": 1.0,
    "snr_db": 10.0, "distance_m": None, "tx_power_dbm": 43.0, "antenna_gain_db": 14.0,
    "noise_figure_db": 9.0, "noise_bandwidth_hz": None, "snr_offset_db": 0.0,
    "profile": "flat", "speed_kmh": 3.0, "shadowing_std_db": 0.0, "shadowing_corr_m": 50.0,
    "n_oscillators": 128, "channel_trace": None, "channel_column": None, "channel_resample": "hold",
    "csi_delay_tti": 0,
    "harq_max_tx": 4, "harq_priority": True, "harq_feedback_tti": 0, "harq_processes": 0, "harq_combining": "chase",
    "link_adaptation": "cqi", "la_interval": 10, "la_bler_up": 0.3, "la_bler_down": 0.1,
    "la_hybrid_db": 15.0, "la_olla_step_db": 0.5, "la_olla_max_db": 10.0,
    "nr_scs_khz": None, "nr_bandwidth_mhz": None, "nr_frequency_range": "fr1", "nr_symbols": 12,
    "nr_dmrs_symbols": 1, "nr_cdm_groups": 2, "nr_layers": 1, "nr_mcs_table": "qam256",
    "nr_overhead_re": 0, "nr_cqi_table": None,
    "scheduler": "pf", "pf_a": 0.001, "pf_window": 0, "lam": 1.0,
    "backlog_channel_bps": 9600.0, "backlog_channels": [1, 2, 4, 8, 16],
    "backlog_thresholds_db": [-14.0, -11.0, -8.0, -5.0, -2.0], "backlog_sector_channels": 32,
    "backlog_interval_s": 0.1, "backlog_drain_s": 0.5, "backlog_greedy_bytes": 6000.0,
    "backlog_greedy_s": 3.0, "backlog_greedy_channels": 8,
    "traffic": "full", "traffic_rate_bps": 1e6, "packet_bytes": 1500, "buffer_packets": 500,
    "on_s": 1.0, "off_s": 5.0, "onoff_exponential": False, "traffic_trace": None,
    "chunk_elements": 4_000_000, "harq_ring": 4096, "mac_log": True,
}
PRESET_DIR = Path(S.engine.__file__).parent / "presets"


def _yaml_value(v):
    """PyYAML (YAML 1.1) reads 4.32e6 as a string; such strings are floats."""
    if isinstance(v, list):
        return [_yaml_value(x) for x in v]
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return v
    return v


def _reference_preset(name) -> dict:
    data = yaml.safe_load((PRESET_DIR / f"{name}.yaml").read_text())
    base = data.pop("preset", None)
    merged = _reference_preset(base) if base else {}
    merged.update({k: _yaml_value(v) for k, v in data.items()})
    return merged


def test_defaults_are_the_declared_table():
    assert S.DEFAULTS == REFERENCE_DEFAULTS
    assert type(S.DEFAULTS["n_users"]) is int and type(S.DEFAULTS["snr_db"]) is float


@pytest.mark.parametrize("name", S.PRESETS)
def test_every_preset_resolves_to_the_reference_values(name):
    cfg = S.resolve_config(name)
    expected = {**REFERENCE_DEFAULTS, **_reference_preset(name), "preset": name}
    assert cfg == expected
    for key, value in expected.items():          # the same types too: 18 stays an int
        assert type(cfg[key]) is type(value), key
    S.check_config(cfg)


def test_a_preset_file_with_an_unknown_key_names_the_file_and_key(tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("preset: quick\nn_users: 3\npf_aa: 0.1\n")
    with pytest.raises(AirlinkError, match=r"mine\.yaml: unknown preset parameter 'pf_aa'"):
        S.load_preset(f)
    f.write_text("preset: quick\nharq_max_tx: 0\n")
    with pytest.raises(AirlinkError, match=r"mine\.yaml: harq_max_tx: must be between 1 and 64 \(got 0\)"):
        S.load_preset(f)
    f.write_text("preset: evdo\nusers: 3\n")           # an alias is the parameter it names
    assert S.resolve_config(f)["n_users"] == 3


@pytest.mark.parametrize("override,msg", [
    ({"pf_a": 0.0}, "pf_a: must be greater than 0 and at most 1 (got 0)"),
    ({"pf_a": 2}, "pf_a: must be greater than 0 and at most 1 (got 2)"),
    ({"n_users": 2.5}, "n_users: expected an integer, got 2.5"),
    ({"n_users": True}, "n_users: expected an integer, got True"),
    ({"link_adaptation": "magic"}, "link_adaptation: must be 'cqi', 'ci', 'bler', 'hybrid', 'ideal' or 'olla'"),
    ({"profile": ["ped-a", 3]}, "profile: expected a name or a list of names"),
    ({"tti": "fast"}, "tti: cannot read TTI 'fast'"),
    ({"csi_delay_tti": -1}, "csi_delay_tti: must be between 0 and 10000 (got -1)"),
])
def test_a_bad_value_is_one_line_naming_the_parameter(override, msg):
    with pytest.raises(AirlinkError) as exc:
        S.simulate("quick", duration="10ms", **override)
    assert str(exc.value).startswith(msg) and "\n" not in str(exc.value)


def test_values_keep_their_type_through_validation():
    import numpy as np
    cfg = S.resolve_config("quick", {"snr_db": np.array([3.0, 1.0]), "n_users": np.int64(2)})
    checked = S.CellConfig.model_validate({k: v for k, v in cfg.items() if k in S.DEFAULTS})
    assert checked.snr_db is cfg["snr_db"] and checked.n_users == 2
    assert S.check_config(cfg) == (2, 24)


def test_cli_bad_set_is_one_line(run_airlink, tmp_path):
    status, out, err = run_airlink("simulate", "--set", "harq_max_tx=0", "-o", tmp_path / "x")
    assert status == 2 and err.strip() == \
        "airlink: error: --set 'harq_max_tx=0': harq_max_tx: must be between 1 and 64 (got 0)"



def test_cli_options_name_declared_parameters():
    from airlink.cli.simulate import PARAMETER_OPTIONS
    assert set(PARAMETER_OPTIONS) <= set(S.CellConfig.model_fields)


def test_kernel_parameter_slots_are_distinct_and_dense():
    ints = {n: getattr(K, n) for n in dir(K) if n.startswith("IP_")}
    floats = {n: getattr(K, n) for n in dir(K) if n.startswith("FP_")}
    assert sorted(ints.values()) == list(range(K.N_IP))
    assert sorted(floats.values()) == list(range(K.N_FP))


def test_cli_config_file_errors_name_the_file(run_airlink, tmp_path):
    f = tmp_path / "cell.yaml"
    f.write_text("preset: evdo\nbogus: 1\n")
    status, out, err = run_airlink("simulate", "--config", f, "-o", tmp_path / "x")
    assert status == 2 and err.startswith(f"airlink: error: {f}: unknown preset parameter 'bogus'")
    f.write_text("preset: evdo\nduration: 0.5s\nusers: 3\n")
    status, out, err = run_airlink("simulate", "--config", f, "-o", tmp_path / "y", "--json")
    s = json.loads(out)
    assert status == 0 and s["preset"] == "evdo" and s["n_users"] == 3
    assert s["n_tti"] == 300                      # 0.5 s of 1/600 s slots


@pytest.mark.parametrize("radio,msg", [
    ({"preset": "quick", "pf_aa": 0.1}, "radio.pf_aa: unknown preset parameter 'pf_aa'"),
    ({"preset": "quick", "harq_max_tx": 0}, "radio.harq_max_tx: must be between 1 and 64"),
])
def test_experiment_radio_overrides_are_checked_against_the_config(radio, msg):
    from airlink.experiment.spec import validate_spec
    with pytest.raises(AirlinkError, match=msg.replace(".", r"\.")):
        validate_spec({"radio": radio}, where="x.yaml")
    assert validate_spec({"radio": {"preset": "quick", "users": 2}}).radio.overrides() == {"users": 2}


def test_exponent_numbers_without_a_dot_or_sign_are_numbers(tmp_path):
    """YAML 1.2 reads 1e6 and 1.08e6 as floats (YAML 1.1 wants '1.08e+6'): a --set value and
    an experiment file's cell set both take them as the numbers they are."""
    from airlink.cli._common import parameter_sets
    from airlink.core.yamlfile import load_yaml_text
    assert parameter_sets(["bandwidth_hz=1.08e6"]) == {"bandwidth_hz": 1080000.0}
    assert load_yaml_text("a: [1e6, -2E-3, 1.5, 7, abc, 1e, e5]", "x") == \
        {"a": [1e6, -0.002, 1.5, 7, "abc", "1e", "e5"]}
