"""``kairox chat``: the terminal chat (Textual) and its plain, scriptable mode."""
