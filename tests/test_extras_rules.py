"""The rules of core/extras.py no other test asserts: which extra brings each optional
package, and what needs_extra does with a missing module (named, unnamed, unknown, or
already clear)."""

from __future__ import annotations

import pytest

from toolnexus.core.extras import EXTRAS, MissingExtraError, needs_extra


def test_each_optional_package_names_its_extra():
    assert EXTRAS == {
        "redis": "redis",
        "psycopg": "postgres",
        "psycopg_pool": "postgres",
        "cryptography": "crypto",
        "yaml": "skills",
        "matplotlib": "notebooks",
    }


@pytest.mark.parametrize("module, extra", sorted(EXTRAS.items()))
def test_a_missing_package_says_which_extra_to_install(module, extra):
    with pytest.raises(MissingExtraError) as e:
        with needs_extra("the feature"):
            raise ModuleNotFoundError(f"No module named {module!r}", name=f"{module}.sub")
    assert str(e.value) == (
        f"the feature needs the {module!r} package: pip install 'toolnexus[{extra}]'"
    )
    assert e.value.name == f"{module}.sub" and e.value.__cause__ is None


def test_a_module_no_extra_brings_or_without_a_name_goes_on_as_it_is():
    for error in (ModuleNotFoundError("x", name="numpy"), ModuleNotFoundError("no name")):
        with pytest.raises(ModuleNotFoundError) as e:
            with needs_extra("f"):
                raise error
        assert e.value is error


def test_an_error_already_clear_is_not_wrapped_again():
    clear = MissingExtraError("outer needs the 'redis' package", name="redis")
    with pytest.raises(MissingExtraError) as e:
        with needs_extra("f"):
            raise clear
    assert e.value is clear
