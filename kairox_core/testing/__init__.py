"""Test support shipped with kairox-core: fixtures and contract test classes.

Plugins' test suites load the fixtures with ``pytest_plugins = ["kairox_core.testing.fixtures"]``
(kairox-core's own ``conftest.py`` does) and subclass the contract classes:
``contracts`` (retrievers, embedding backends, indexable knowledge bases),
``storage_contract``, ``memory_store_contract``, ``longterm_contract``,
``provider_contract`` (model providers), ``compaction_contract`` (compaction
strategies), ``reranker_contract`` (rerankers) and ``engine_contract`` (engines).
"""

from __future__ import annotations

from kairox_core.plugins import plugin_registered

__all__ = ["plugin_registered"]
