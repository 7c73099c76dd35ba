//! heron-server
