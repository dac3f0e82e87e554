pytest_plugins = ["kairox_core.testing.fixtures"]
