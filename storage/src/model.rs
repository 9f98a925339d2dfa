//! The data model: the shared vocabulary of `kura-backend` (cells, mutations, read and scan
//! specifications, re-exported here so that the store's modules name them as before), plus the
//! two write types that exist only inside the store: [`WriteOp`], a write of any kind as the
//! log records it and a group commit batches it, and [`WriteOutcome`], its answer.

pub use kura_backend::model::*;

/// The answer to a write of any kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// A plain mutation was applied.
    Mutated,
    /// New values of an increment or an append, in request order, with their timestamps.
    Cells(Vec<Cell>),
    /// Check-and-mutate: `true` if the check passed and the mutations were applied.
    Checked(bool),
}

/// Any write, so that a batch of waiting writes can be committed with one fsync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteOp {
    Mutate(RowMutation),
    Increment(Increment),
    Append(Append),
    CheckAndMutate(CheckAndMutate),
    /// A write carrying an idempotency key: within the store's window (see
    /// `IdempotencyOptions`), a write with the same key on the same row is not applied again
    /// but answered with the first outcome. `op` must not itself be `Keyed`.
    Keyed {
        key: Vec<u8>,
        op: Box<WriteOp>,
    },
}

impl WriteOp {
    /// `self` with an idempotency key (`None`: unchanged).
    pub fn with_key(self, key: Option<Vec<u8>>) -> WriteOp {
        match key {
            Some(key) => WriteOp::Keyed {
                key,
                op: Box::new(self),
            },
            None => self,
        }
    }

    /// The row this write touches.
    pub fn row(&self) -> &[u8] {
        match self {
            WriteOp::Mutate(m) => &m.row,
            WriteOp::Increment(i) => &i.row,
            WriteOp::Append(a) => &a.row,
            WriteOp::CheckAndMutate(c) => &c.row,
            WriteOp::Keyed { op, .. } => op.row(),
        }
    }
}
