"""Stand-ins for what the build does not load: a name bound by a skipped data statement,
a count read from data, a preprocessing layer adapted to data that is not there.

Each stand-in either carries a stated default (said in a note, and, where it sizes a
layer, an assumption the report draws nothing from) or fails naming the line whose data
it stands for. Never a silently smaller model.
"""

from __future__ import annotations

import dis
import re
import sys
from typing import Any, ClassVar, Iterator, NoReturn

from .childbase import DEFAULT_CLASSES, DEFAULT_IMAGE, DEFAULT_SEQUENCE, DEFAULT_VOCABULARY

NEEDS_SHAPE = "its shape is read from data: pass --input-shape with its non-batch dims"
# tf.data.Dataset's methods that give a dataset: a for loop over one yields a batch.
_DATASET_METHODS = frozenset({"take", "batch", "shuffle", "prefetch", "map", "skip", "repeat", "cache",
                              "unbatch", "padded_batch", "filter"})
# How a note about an array's shape read from data not loaded starts (Unloaded).
DATA_SHAPE = "the shape of "
_CLASSY = re.compile(r"class|label|categor", re.I)
_COUNT_NAME = re.compile(
    r"^(num|n|nb|number_of|count|total)_?\w*(classes|labels|categories|users|movies|items|tokens|words|"
    r"chars|characters|vocab\w*|outputs|targets)$|^vocab(ulary)?_?size$|^max_?(features|tokens|words)$",
    re.I)
# How an assumption about a layer's size starts (the report draws nothing from such a build).
ASSUMED_SIZE = "a layer sized by data the build does not load: "


class DataNotLoaded(Exception):
    """The model read something that comes from data the build does not load, or from a
    statement that failed: ``line`` and ``why`` are the root cause."""

    def __init__(self, name: str, line: int, why: str):
        super().__init__(f"{name!r} depends on line {line}, which the build does not run ({why})")
        self.line, self.why = line, why


class Unloaded:
    """Stands for a name the slice did not bind: a skipped data statement's, or a failed
    statement's. Reading into it (an item, an attribute, a method call: ``df["col"].unique()``)
    gives another stand-in from the same root; using it as a number, a truth value or in
    arithmetic raises and names the line it came from. The two uses with a stated default:
    ``len()`` (a count of classes or tokens) and iterating it (a vocabulary: that many
    distinct tokens), each said in a note.

    An array's shape is followed as far as the script states it: ``x.reshape((x.shape[0],
    x.shape[1], 1))`` gives a stand-in of shape ``(None, None, 1)``, whose ``x.shape[1:]``
    is the real tuple ``(128, 1)``: a dim only the data knows, other than the rows, gets the
    stated default of its modality (a model's layers may need it concrete while it is
    built), said in a note."""

    given: ClassVar[list[int] | None] = None  # --input-shape: an array's shape the data would give

    def __init__(self, name: str, line: int, why: str, notes: list[str],
                 shape: tuple[int | None, ...] | None = None, kind: str = "value"):
        object.__setattr__(self, "_kf", (name, line, why, notes))
        # kind: "value" (anything), "shape" (an array's shape of unknown rank), "dim" (one of its dims)
        object.__setattr__(self, "_kf_shape", (shape, kind))

    def _fail(self, *args: object, **kwargs: object) -> NoReturn:
        name, line, why, _ = object.__getattribute__(self, "_kf")
        raise DataNotLoaded(name, line, why)

    def _derived(self, *args: object, **kwargs: object) -> Unloaded:
        return self

    def _like(self, shape: tuple[int | None, ...] | None = None, kind: str = "value") -> Unloaded:
        name, line, why, notes = object.__getattribute__(self, "_kf")
        return Unloaded(name, line, why, notes, shape, kind)

    def _reshape(self, *args: Any, **kwargs: Any) -> Unloaded:
        dims = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
        return self._like(tuple(d if isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                else None for d in dims))

    def _shape(self, shape: tuple[int | None, ...] | None) -> tuple[int | None, ...]:
        """The shape the script reads: its rows stay unknown (the batch); the other dims
        only the data knows come from --input-shape, else the stated default of their
        modality, said in a note. ``shape`` is None when not even its rank is known."""
        if shape is not None and all(d is not None for d in shape[1:]):
            return shape
        name, line, why, notes = object.__getattribute__(self, "_kf")
        if self.given and (shape is None or len(self.given) == len(shape) - 1):
            note = f"{DATA_SHAPE}{name} is read from data (line {line}): --input-shape gives it"
            if note not in notes:
                notes.append(note)
            return (None, *self.given)
        assert shape is not None  # the caller asks only with a rank or with --input-shape
        image = len(shape) == 4 and shape[-1] is not None  # (rows, H, W, C)
        n = DEFAULT_IMAGE if image else DEFAULT_SEQUENCE
        filled = shape[:1] + tuple(n if d is None else d for d in shape[1:])
        shown = ", ".join("rows" if i == 0 else str(d) for i, d in enumerate(filled))
        note = (f"{DATA_SHAPE}{name} is read from data (line {line}: {why}): built as ({shown}), "
                f"{n} a stated default for {'images' if image else 'sequences'}; --input-shape to change")
        if note not in notes:
            notes.append(note)
        return filled

    def __getattr__(self, attr: str) -> Any:
        # Not a mapping: ``dict(df)`` must not make a real object of stand-ins.
        if attr.startswith("__") and attr.endswith("__") or attr in ("keys", "items", "values"):
            raise AttributeError(attr)
        shape, kind = object.__getattribute__(self, "_kf_shape")
        if attr == "shape" and kind == "value":
            if shape is not None or self.given:
                return self._shape(shape)
            # Its shape is read, and only the data knows it: whatever fails from here names the flag.
            name, line, why, notes = object.__getattribute__(self, "_kf")
            if NEEDS_SHAPE not in why:
                object.__setattr__(self, "_kf", (name, line, f"{why}; {NEEDS_SHAPE}", notes))
            return self._like(kind="shape")
        if attr == "reshape" and kind == "value":
            return self._reshape
        if attr in _DATASET_METHODS:
            return self._like(kind="dataset")
        return self

    def __iter__(self) -> Iterator[Any]:
        # What the script does with it, from the instruction that asks: unpacking it into n
        # names (a batch's ``inputs, targets``) gives n stand-ins; a for loop over a dataset
        # (``for batch in ds.take(1)``) one batch; anything else a vocabulary of stated size.
        _, kind = object.__getattribute__(self, "_kf_shape")
        frame = sys._getframe(1)
        asked = next((i for i in dis.get_instructions(frame.f_code) if i.offset == frame.f_lasti), None)
        if asked is not None and asked.opname == "UNPACK_SEQUENCE" and asked.arg is not None:
            return iter([self._like() for _ in range(asked.arg)])
        if asked is not None and asked.opname == "GET_ITER" and kind == "dataset":
            return iter([self._like()])
        return iter([f"token{i}" for i in range(self._default("the vocabulary"))])

    __call__ = _derived

    def __getitem__(self, key: object) -> Any:
        # A column by name reads on; a position is a value (numpy walks a sequence by them).
        shape, kind = object.__getattribute__(self, "_kf_shape")
        if isinstance(key, str):
            return self
        if kind == "shape":  # a dim, or dims, of unknown rank
            return self._like(kind="shape" if isinstance(key, slice) else "dim")
        if kind == "value" and shape and (isinstance(key, slice) or hasattr(key, "__len__")):
            return self._like((None,) + shape[1:])  # rows picked or shuffled: same row shape
        self._fail()
        return self

    __bool__ = __index__ = __int__ = __float__ = __array__ = _fail  # numpy must not make it an array
    __add__ = __radd__ = __mul__ = __rmul__ = __sub__ = __rsub__ = __truediv__ = __floordiv__ = _fail
    __lt__ = __le__ = __gt__ = __ge__ = _fail

    def _default(self, what: str) -> int:
        name, line, why, notes = object.__getattribute__(self, "_kf")
        n = DEFAULT_CLASSES if _CLASSY.search(name) else DEFAULT_VOCABULARY
        note = f"{what} of {name} is read from data (line {line}: {why}): built with a stated default of {n}"
        if note not in notes:
            notes.append(note)
        return n

    def __len__(self) -> int:
        return self._default("the count")

    def __repr__(self) -> str:
        return f"<{object.__getattribute__(self, '_kf')[0]}: not loaded>"


def count_default(name: str) -> int | None:
    if not _COUNT_NAME.match(name):
        return None
    return DEFAULT_CLASSES if _CLASSY.search(name) else DEFAULT_VOCABULARY


_LOOKUPS = ("StringLookup", "IntegerLookup", "TextVectorization")


def patch_adapt(keras_module: Any, notes: list[str]) -> None:
    """A preprocessing layer adapted to data the build does not load keeps a stated default:
    a lookup gets a vocabulary of that many tokens, a normalization mean 0 and variance 1.
    A lookup never adapted (its ``adapt`` was a data statement the slice skipped) whose
    vocabulary size the script reads to size a layer (``Dense(lookup.vocabulary_size())``)
    gets the same default vocabulary, said as an assumption: without it that layer would be
    one unit wide."""
    layers = getattr(keras_module, "layers", None)
    for name in ("StringLookup", "IntegerLookup", "TextVectorization", "Normalization", "Discretization"):
        cls = getattr(layers, name, None)
        original = getattr(cls, "adapt", None)
        if cls is None or original is None or getattr(original, "_kerasfit", False):
            continue

        def adapt(self: Any, data: Any = None, *args: Any, _original: Any = original, _name: str = name,
                  **kwargs: Any) -> Any:
            if not isinstance(data, Unloaded):
                return _original(self, data, *args, **kwargs)
            if hasattr(self, "set_vocabulary"):
                _default_vocabulary(self, _name, list(data))
            note = (f"{_name}.adapt() reads data the build does not load ({data!r}): "
                    f"{'a vocabulary of ' + str(DEFAULT_VOCABULARY) if hasattr(self, 'set_vocabulary') else 'defaults'}"
                    " (stated default)")
            if note not in notes:
                notes.append(note)
            return None

        adapt._kerasfit = True  # type: ignore[attr-defined]  # patched once
        cls.adapt = adapt
        if name in _LOOKUPS:
            _patch_vocabulary_size(cls, name, notes)


def _default_vocabulary(layer: Any, name: str, tokens: list[Any]) -> None:
    vocab = list(range(1, DEFAULT_VOCABULARY + 1)) if name == "IntegerLookup" else tokens
    layer.set_vocabulary(vocab[:DEFAULT_VOCABULARY])


def _patch_vocabulary_size(cls: Any, name: str, notes: list[str]) -> None:
    original = getattr(cls, "vocabulary_size", None)
    if original is None or getattr(original, "_kerasfit", False):
        return

    def vocabulary_size(self: Any) -> Any:
        if not _has_vocabulary(self):
            site = getattr(self, "_kerasfit_site", None)
            where = f" (made at line {site['line']})" if site else ""
            _default_vocabulary(self, name, [f"token{i}" for i in range(DEFAULT_VOCABULARY)])
            note = (f"{ASSUMED_SIZE}{name} {getattr(self, 'name', '')}{where} was never adapted here, "
                    f"so its vocabulary_size() is read as a stated default of {DEFAULT_VOCABULARY} tokens")
            if note not in notes:
                notes.append(note)
        return original(self)

    vocabulary_size._kerasfit = True  # type: ignore[attr-defined]  # patched once
    cls.vocabulary_size = vocabulary_size


def _has_vocabulary(layer: Any) -> bool:
    """Whether a lookup layer holds any token of its own (beyond its mask and OOV ones)."""
    try:
        return bool(layer.get_vocabulary(include_special_tokens=False))
    except TypeError:  # a signature without include_special_tokens
        special = {getattr(layer, "mask_token", None), getattr(layer, "oov_token", None), "", "[UNK]"}
        return any(t not in special for t in layer.get_vocabulary())
    except Exception:
        return True  # what cannot be asked is left as it is
