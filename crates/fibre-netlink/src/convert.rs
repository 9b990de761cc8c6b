//! Conversions between rtnetlink messages and fibre's model types.
