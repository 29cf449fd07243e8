"""Federated simulation: batched local training (engine), the FedAvg loop (rounds), aggregation, simulate()."""
