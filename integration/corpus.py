"""What each knowledge base holds: every source has a volcano passage and an unrelated one.

``vol-ash`` is in both Pinecone and Weaviate under the same id, so the fused list must
show it once, credited to both. ``QUERY`` matches one or two passages in every source.
"""

from __future__ import annotations

import json

from kairox_core.testing.contracts import ContractDoc

QUERY = "volcano lava eruption"

ASH = ContractDoc(
    "vol-ash",
    "Volcanic ash",
    "Ash from a volcano eruption grounds aircraft; fine lava fragments travel far.",
)

PINECONE_DOCS = (
    ASH,
    ContractDoc(
        "vol-basalt",
        "Basalt",
        "Basalt forms when runny lava from a shield volcano cools quickly.",
        {"topic": "geology"},
    ),
    ContractDoc(
        "sea-tides",
        "Tides",
        "The moon's gravity pulls the oceans and makes the tides rise and fall.",
        {"topic": "physics"},
    ),
)

WEAVIATE_DOCS = (
    ASH,
    ContractDoc(
        "vol-pyro",
        "Pyroclastic flows",
        "A pyroclastic flow is a fast current of hot gas and rock from a volcano eruption.",
    ),
    ContractDoc(
        "min-quartz",
        "Quartz",
        "Quartz is a hard mineral made of silicon and oxygen found in granite.",
    ),
)

NOTES = tuple(
    json.dumps(doc)
    for doc in (
        {
            "_id": "note-seismic",
            "title": "Seismic monitoring",
            "text": (
                "Seismometers watch a volcano for swarms of small quakes before a lava eruption."
            ),
            "metadata": {"team": "science"},
        },
        {
            "_id": "note-photo",
            "title": "Photosynthesis",
            "text": "Plants turn sunlight into chemical energy with chlorophyll in their leaves.",
            "metadata": {"team": "biology"},
        },
    )
)

BEDROCK_DOCS = (
    ContractDoc(
        "kb-evacuation",
        "Evacuation",
        "When a volcano alert is raised, follow the evacuation route: lava and "
        "eruption zones are closed.",
        {"audience": "staff"},
    ),
    ContractDoc(
        "kb-refunds",
        "Refunds",
        "Refunds for cancelled tours are paid within fourteen days.",
        {"audience": "customers"},
    ),
)

FAQ_FILES = {
    "volcano-tours.md": "# Volcano tours\n\nTours to the lava fields run only while no "
    "eruption is expected.\n",
    "opening-hours.md": "# Opening hours\n\nThe visitor centre opens at nine every day.\n",
}
