"""Sluice's client side: Spark data source, commit protocol, assignors, the paper's consumer,
mirror, audit."""
