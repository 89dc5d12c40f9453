"""What every room reads and nothing else: the engine's limits and protocol constants
(`limits`), why it refuses a request (`errors`), the array idioms the columns share
(`arrays`), time as ages (`ages`). Imports no other room."""
