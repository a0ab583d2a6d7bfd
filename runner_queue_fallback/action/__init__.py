"""The action's own steps: `coordinate` (the fallback sequence), `guard`, `cleanup`."""
