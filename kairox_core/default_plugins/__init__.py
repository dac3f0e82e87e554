"""Built-in plugins: registered exactly like external ones (see plugins.DEFAULT_PLUGINS)."""
