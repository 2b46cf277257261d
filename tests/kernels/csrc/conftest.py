import pytest

from kernels import cpu_kernels


@pytest.fixture(params=cpu_kernels.runnable_isas())
def isa(request) -> str:
    """Each build of the kernels this CPU can execute (AVX2 and plain C++ on any x86 machine,
    AVX-512 too where it has it), whichever one the engine runs."""
    assert cpu_kernels.load(request.param)  # the build must work wherever the tests run
    return request.param
