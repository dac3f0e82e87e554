"""Compaction: summarise old history into events with provenance, never deleting it.

See compactor.py (the engine), planning.py (what to compact), strategies.py (calling a
strategy), attachments.py, recall.py (recall of past turns, the other engine).
"""
