//! The data model: the shared vocabulary of `kura-backend` (cells, mutations, read and scan
//! specifications, re-exported here so that the store's modules name them as before), plus the
//! write types that exist only inside the store: [`WriteOp`], a write of any kind as the log
//! records it, [`KeyedWrite`], one with its optional idempotency key as a group commit batches
//! it, and [`WriteOutcome`], its answer.

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
}

/// A write and its idempotency key, if it carries one: what a batch commits. Within the
/// store's window (see `IdempotencyOptions`), a write with the same key on the same row is not
/// applied again but answered with the first outcome. The key wraps one [`WriteOp`], which
/// has no keyed variant, so a write with two keys cannot be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyedWrite {
    pub op: WriteOp,
    pub key: Option<Vec<u8>>,
}

impl KeyedWrite {
    /// The row this write touches.
    pub fn row(&self) -> &[u8] {
        self.op.row()
    }
}

impl From<WriteOp> for KeyedWrite {
    fn from(op: WriteOp) -> KeyedWrite {
        KeyedWrite { op, key: None }
    }
}

impl From<(WriteOp, Option<Vec<u8>>)> for KeyedWrite {
    fn from((op, key): (WriteOp, Option<Vec<u8>>)) -> KeyedWrite {
        KeyedWrite { op, key }
    }
}

impl WriteOp {
    /// `self` with an idempotency key (`None`: an unkeyed write).
    pub fn with_key(self, key: Option<Vec<u8>>) -> KeyedWrite {
        KeyedWrite { op: self, key }
    }

    /// The row this write touches.
    pub fn row(&self) -> &[u8] {
        match self {
            WriteOp::Mutate(m) => &m.row,
            WriteOp::Increment(i) => &i.row,
            WriteOp::Append(a) => &a.row,
            WriteOp::CheckAndMutate(c) => &c.row,
        }
    }
}
