"""Pure core: values in, values out. No I/O, no environment, no clock."""
