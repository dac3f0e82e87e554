"""Compaction: summarise old history into events with provenance, never deleting it.

See compactor.py (the engine), planning.py (what to compact), strategies.py (calling a
strategy), attachments.py, hooks.py (``on_compacted`` for other engines).
"""
