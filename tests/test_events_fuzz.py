"""Event JSON round trips for generated instances of every registered type
(issue 13, item 11). Uses only the public surface (``EVENT_TYPES``, ``to_dict``,
``event_from_dict``), so it holds whatever the classes are built with."""

from __future__ import annotations

import inspect
import json
import types
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kairox_core import events
from kairox_core.events import EVENT_TYPES, GenericEvent, event_from_dict

JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
JSON = st.recursive(
    JSON_SCALARS | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def strategy_for(hint: Any) -> st.SearchStrategy[Any]:
    """A JSON-faithful strategy for a field's type (floats finite, Any as JSON)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return JSON
    if hint is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(strategy_for(a) for a in args))
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(strategy_for(args[0]), max_size=4).map(tuple)
        return st.tuples(*(strategy_for(a) for a in args))
    if origin is list:
        return st.lists(strategy_for(args[0]), max_size=4)
    if origin is dict:
        return st.dictionaries(st.text(max_size=8), strategy_for(args[1]), max_size=3)
    return st.from_type(hint)


def instances(cls: type[Any]) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls, vars(events))
    params = inspect.signature(cls).parameters
    fields = {name: strategy_for(hints[name]) for name in params if name in hints}
    fields["seq"] = st.none() | st.integers(0, 2**53)
    fields["created_at"] = st.floats(0, 4e9, allow_nan=False)
    return st.builds(cls, **fields)


KNOWN = sorted(name for name in EVENT_TYPES if name != "GenericEvent")


@pytest.mark.slow
@pytest.mark.parametrize("name", KNOWN)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_event_type_round_trips_through_json(name: str, data: st.DataObject) -> None:
    event = data.draw(instances(EVENT_TYPES[name]))
    back = event_from_dict(json.loads(json.dumps(event.to_dict())))
    assert type(back) is type(event)
    assert back == event
    assert back.to_dict() == event.to_dict()


@pytest.mark.slow
@settings(max_examples=50, deadline=None)
@given(
    type_name=st.text(min_size=1, max_size=30).filter(lambda t: t not in EVENT_TYPES),
    payload=st.dictionaries(st.text(max_size=8), JSON, max_size=4),
    version=st.integers(1, 99),
)
def test_unknown_types_load_as_generic_events(
    type_name: str, payload: dict[str, Any], version: int
) -> None:
    d = {
        "type": type_name,
        "version": version,
        "session_id": "s",
        "seq": 3,
        "created_at": 1.5,
        "payload": payload,
    }
    event = event_from_dict(json.loads(json.dumps(d)))
    assert isinstance(event, GenericEvent)
    assert event.type == type_name and event.payload() == payload
    assert event.to_dict() == d
