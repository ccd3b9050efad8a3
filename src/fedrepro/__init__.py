"""fedrepro: regenerate the tables and figures of five federated-learning papers."""
