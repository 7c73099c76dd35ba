//! heron-zone
