"""What every Sluice package shares: ``.properties`` files, structured logging, option parsing.

The bottom layer: it imports nothing from Sluice, and everything may import it.
"""
