"""Bad input raises gpurt.Error naming the key and the event, never crashes the interpreter."""
import copy
import random

import pytest

import gpurt
from conftest import shared_snapshot, trusted_dict


def expect(snap, exc, *needles):
    with pytest.raises(exc) as e:
        gpurt.load(snap)
    for n in needles:
        assert n in str(e.value), str(e.value)
    return e.value


@pytest.mark.parametrize("value, words", [
    ("abc", "'size' is not a non-negative integer"),
    (-5, "'size' is not a non-negative integer"),
    (2 ** 70, "'size' is not a non-negative integer (wider than 64 bits)"),
    (1.5, "'size' is not a non-negative integer"),
    (None, "'size' is missing"),
    ([1], "'size' is not a non-negative integer"),
])
def test_bad_size_names_key_and_event(snapshot, value, words):
    snapshot["device_traces"][0][2]["size"] = value
    err = expect(snapshot, gpurt.ParseError, "device_traces[0][2]", words)
    assert err.status == "GRT_ERR_PARSE" and err.code == 16


def test_missing_keys(snapshot):
    del snapshot["device_traces"][0][1]["size"]
    expect(snapshot, gpurt.ParseError, "device_traces[0][1]: 'size' is missing")
    s = {"segments": [{"address": 1}], "device_traces": [[]]}
    expect(s, gpurt.ParseError, "segments[0]: 'total_size' is missing")
    s = {"device_traces": [[{"addr": 5, "size": 1}]]}
    expect(s, gpurt.ParseError, "device_traces[0][0]: 'action' is missing")


def test_wrong_types(snapshot):
    snapshot["device_traces"][0][3]["action"] = "bogus"
    expect(snapshot, gpurt.ParseError, "device_traces[0][3]: unknown action 'bogus'")
    expect({"segments": 5}, gpurt.ParseError, "'segments' is not a list")
    with pytest.raises(gpurt.ParseError):
        gpurt.load({"device_traces": [[7]]})


def test_objects_are_refused_before_pickling(snapshot):
    class Sneaky:
        def __reduce__(self):
            raise AssertionError("never pickled")

    snapshot["device_traces"][0][4]["frames"] = [Sneaky()]
    expect(snapshot, gpurt.ParseError, "snapshot['device_traces'][0][4]['frames'][0]", "Sneaky")


def test_not_a_snapshot():
    with pytest.raises(gpurt.InvalidArgError):
        gpurt.load(42)
    with pytest.raises(gpurt.ParseError):
        gpurt.load(b"not a pickle at all\n")
    with pytest.raises(gpurt.InvalidArgError):
        gpurt.load({}, device=-1)


def test_every_status_has_its_class():
    from gpurt._errors import BY_STATUS

    names = {name for _, name, _ in gpurt.statuses() if name != "GRT_OK"}

    assert names == set(BY_STATUS)
    for code, name, _ in gpurt.statuses():
        if code:
            assert BY_STATUS[name]("m", name, code).code == code


VALUES = [None, "x", "", -1, 0, 1, 2 ** 63, 2 ** 64, 2 ** 200, -(2 ** 70), 1.5, float("nan"), True, [], {},
          [1, 2], {"a": 1}, b"\x00", (1, 2)]


def mutate(snap, rng):
    """One random change: a value replaced, a key removed, a list entry dropped or doubled."""
    events = snap["device_traces"][0]
    target = rng.choice(events) if events and rng.random() < 0.7 else rng.choice(snap["segments"] or [{}])
    kind = rng.random()
    if kind < 0.6 and target:
        target[rng.choice(list(target))] = rng.choice(VALUES)
    elif kind < 0.8 and target:
        target.pop(rng.choice(list(target)))
    elif events:
        i = rng.randrange(len(events))
        if rng.random() < 0.5:
            events.pop(i)
        else:
            events.insert(i, copy.deepcopy(events[i]))


def fuzz(base, rounds, seed):
    rng = random.Random(seed)
    outcomes = {"loaded": 0, "refused": 0}
    for _ in range(rounds):
        snap = copy.deepcopy(base)
        for _ in range(rng.randint(1, 3)):
            mutate(snap, rng)
        try:
            t = gpurt.load(snap)
        except gpurt.Error as e:
            assert e.status in ("GRT_ERR_PARSE", "GRT_ERR_INVALID_ARG"), e
            outcomes["refused"] += 1
            continue
        outcomes["loaded"] += 1
        try:  # a loaded trace replays or is refused with a status, never a crash
            gpurt.replay(t, search=False)
        except gpurt.Error:
            pass
    return outcomes


def test_fuzz_built(snapshot):
    out = fuzz(snapshot, 400, seed=1)
    assert out["refused"] > 50 and out["loaded"] > 20, out


def test_fuzz_shared_snapshot():
    base = trusted_dict(shared_snapshot("bcrafton_memory_snapshot.pickle"))
    base["device_traces"][0] = base["device_traces"][0][:400]  # a replayable prefix keeps each round short
    out = fuzz(base, 150, seed=2)
    assert out["refused"] > 10, out
