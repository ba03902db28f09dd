//! What gres/mps and gres/shard have in common: a shared GRES whose count is
//! spread over the node's GPUs.  (Being written: see issue 4.)
