"""The options the plan allows (read from source, without torch) are those the registered
algorithms, tunings and adaptation methods take when imported."""

from __future__ import annotations

import inspect

import pytest

from fedrepro.algorithms import ALGORITHMS
from fedrepro.experiments import options
from fedrepro.models.tuning import TUNINGS
from fedrepro.tta import ADAPT_METHODS


def _defaults(cls: type) -> dict:
    """Every keyword of the constructors along the class's bases, with its default."""
    out = {}
    for klass in reversed(cls.__mro__):
        if "__init__" in vars(klass) and klass is not object:
            for p in inspect.signature(klass.__init__).parameters.values():
                if p.default is not inspect.Parameter.empty:
                    out[p.name] = p.default
    return out


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_an_algorithm_takes_exactly_the_options_the_plan_allows(name):
    allowed = options.algorithm_options()[name]
    cls = ALGORITHMS[name]
    for key, default in _defaults(cls).items():
        if key in allowed:
            cls(**{key: default})
        else:  # a base's keyword the class sets itself (pFedPT's head_epochs)
            with pytest.raises(TypeError):
                cls(**{key: default})
    assert allowed <= set(_defaults(cls))
    with pytest.raises((TypeError, ValueError)):
        cls(muu=0.1)


def test_the_registries_read_from_source_equal_the_imported_ones():
    assert set(options.algorithm_options()) == set(ALGORITHMS)
    assert options.tuning_options() == {k: t.options for k, t in TUNINGS.items()}
    assert options.adapt_options() == {k: frozenset(m.options) for k, m in ADAPT_METHODS.items()}
