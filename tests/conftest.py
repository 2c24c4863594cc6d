# Shared pytest plugins; fixtures live in tests/support/ (append more plugin modules here).
pytest_plugins = ["support.fixtures"]
