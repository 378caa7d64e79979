"""Fixtures: `device` runs a test once per WebGPU device of
KILN_PYTHON_TEST_DEVICES (IMPL:BACKEND[,...]; by default Dawn on Vulkan, Dawn
on OpenGL and wgpu-native on Vulkan), each made once per session."""

import os
import pathlib

import numpy as np
import pytest

import kiln

# Devices keep their pool as by default (automatic): the memory tests count
# on it, and those that need KILN_BUFFER_POOL_MB set it themselves.
os.environ.pop("KILN_BUFFER_POOL_MB", None)

REPO = pathlib.Path(__file__).resolve().parents[2]
DEVICES = os.environ.get("KILN_PYTHON_TEST_DEVICES", "dawn:vulkan,dawn:opengl,wgpu:vulkan")
_made = {}


def _device(spec):
    if spec not in _made:
        impl, backend = spec.split(":")
        try:
            _made[spec] = kiln.Device(impl=impl, backend=backend)
        except kiln.Error as e:
            _made[spec] = e
    made = _made[spec]
    if isinstance(made, Exception):
        pytest.fail(f"device {spec} could not be made: {made}")
    return made


@pytest.fixture(params=[s.strip() for s in DEVICES.split(",") if s.strip()])
def device(request):
    return _device(request.param)


@pytest.fixture
def rng():
    return np.random.default_rng()


def require_feature(device, feature):
    if not device.has_feature(feature):
        pytest.skip(f"{device.impl}/{device.backend} has no {feature}")
