//! heron-testkit
