"""Transactions (KIP-98): the transaction coordinator and its state in ``__transaction_state``."""
