from kairox_core.tokens import TokenCounter


def test_cl100k_counts_offline() -> None:
    assert TokenCounter("cl100k_base").count("tiktoken is great!") == 6
