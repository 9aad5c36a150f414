"""Pickles of the shard messages and answers that cost less to load: a search's messages to the
machine actors and their answers (ray_backend/remote.py, actor.py) are plain data, mostly slots
dataclasses and small numpy arrays, and their unpickling was the largest part of a W6 search's
calls on the coordinator (bench/RESULTS.md, "W6's answers: fewer hits, cheaper pickles (session
20, `ray6`)").

- `ByFields`, a base of such dataclasses: each pickles as its class and its field values, loaded
  by one call of the class (its generated `__init__`), where a slots dataclass's own pickling
  lists its fields (`dataclasses.fields`, a new tuple each time) to dump and to load every object.
  Only for dataclasses whose fields are all `__init__` arguments and without `__post_init__`
  (checked at the first pickle of each class): the call rebuilds exactly the object.
- `evolve`: `dataclasses.replace` the same way, for the copies a walk makes per page: its
  values, the changed ones put in, one call of the class (4 us for `SearchRequest`'s 43 fields,
  where `replace` walks `fields()` and passes a keyword per field: 16 us; a scroll batch or PIT
  page made about seven such copies).
- `dumps`: a pickler whose own dispatch table (not the process's `copyreg`) dumps a flat numeric
  or bytes numpy array as its bytes and dtype, loaded by one `numpy.frombuffer` (writable: over a
  `bytearray`), where numpy's own reduction calls a Python function per array.

What these pickles load with is `pickle.loads`: every reconstructor is a class or numpy's.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from functools import cache
from operator import attrgetter
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")


class ByFields:
    """A dataclass base: pickled as (its class, its field values) (see the module's docstring)."""

    __slots__ = ()

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        kind = type(self)
        return kind, _values(kind)(self)


def evolve(obj: T, **changes: Any) -> T:
    """`dataclasses.replace(obj, **changes)` for a dataclass `ByFields` may pickle (every field
    an `__init__` argument, no `__post_init__`): its field values with `changes` put in, passed
    to the class once."""
    kind = type(obj)
    values = list(_values(kind)(obj))
    at = _positions(kind)
    for name, value in changes.items():
        if name not in at:
            raise TypeError(f"{kind.__name__} has no field {name!r}")
        values[at[name]] = value
    return kind(*values)


@cache
def _positions(kind: type) -> dict[str, int]:
    """Each field's place among `_values`' (the `__init__` arguments')."""
    return {f.name: i for i, f in enumerate(fields(kind))}


@cache
def _values(kind: type) -> Callable[[Any], tuple[Any, ...]]:
    """The class's field values as a tuple, by one C call; a class its `__init__` would not
    rebuild is refused."""
    if not is_dataclass(kind) or hasattr(kind, "__post_init__") or not all(f.init for f in fields(kind)):
        raise TypeError(f"{kind.__name__} is not rebuilt by its __init__ from its fields")
    every = fields(kind)
    names = [f.name for f in every]
    if len(names) == 1:
        (name,) = names
        return lambda value: (getattr(value, name),)
    return attrgetter(*names)


def _array(array: np.ndarray) -> tuple[Any, ...]:
    """A flat array of numbers or bytes as (`numpy.frombuffer`, (its bytes, its dtype)); others
    as numpy pickles them."""
    dtype = array.dtype
    if array.ndim == 1 and dtype.kind in "biufS" and dtype.itemsize and array.flags.c_contiguous:
        return np.frombuffer, (pickle.PickleBuffer(array), dtype.str)
    return array.__reduce_ex__(pickle.HIGHEST_PROTOCOL)


class _Pickler(pickle.Pickler):
    dispatch_table = {np.ndarray: _array}


def dumps(value: Any) -> bytes:
    """`value` pickled (the highest protocol), its numpy arrays as `_array` says."""
    out = io.BytesIO()
    _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return out.getvalue()
