"""Blueprints shipped with codeact, usable as ``extend: <name>`` (one ``<name>.yaml`` each)."""
