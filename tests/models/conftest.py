"""Shared by the model tests: none may reach the network (backbone fetches read staged files
or ``file://`` releases only)."""

from __future__ import annotations

import socket

import pytest


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("network access during a test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
