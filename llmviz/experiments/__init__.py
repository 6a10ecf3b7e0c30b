"""The book's recorded experiments, one module per chapter (``ch09`` ...).

Each module defines its experiments at module level and trains nothing on import.
"""
