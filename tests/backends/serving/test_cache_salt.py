"""The worker's `cache_salt` field: taken out of the body before the OpenAI checks, and bounded."""
import pytest

from backends.serving.cache_salt import take_cache_salt
from wire.errors import OpenAIError


def test_the_salt_is_taken_out_of_the_body():
    body = {"model": "m", "cache_salt": "a1-B_2"}
    assert take_cache_salt(body) == "a1-B_2" and body == {"model": "m"}
    assert take_cache_salt({"model": "m"}) is None


@pytest.mark.parametrize("salt", ["", "x" * 65, 7, ["a"], "a b", "ü"])
def test_a_bad_salt_is_a_400_naming_it(salt):
    with pytest.raises(OpenAIError) as caught:
        take_cache_salt({"cache_salt": salt})
    assert caught.value.status == 400 and caught.value.param == "cache_salt"
