//! The file-system layer: every byte the store reads or writes goes through [`FileSystem`].
//!
//! Two implementations:
//! - [`StdFs`]: the real file system (`std::fs`, segments mapped with `memmap2`).
//! - [`SimFs`]: an in-memory file system for tests. It remembers, per file, the bytes as of the
//!   last fsync and, per directory, the names as of the last directory fsync, so that
//!   [`SimFs::power_cut`] can rebuild exactly what a power loss leaves on disk (optionally with a
//!   torn last write), and it can fail the N-th write, fsync, rename or create
//!   ([`SimFs::inject`]).
//!
//! # Invariants
//! 1. The store never rewrites or truncates the mapped part of a file. Segments are mapped whole
//!    and never change. A log is mapped whole for its replay and that map is dropped before its
//!    damaged tail (if any) is truncated; then only its valid frames stay mapped
//!    ([`FileSystem::map_prefix`]), for the memtable's replayed entries, while new frames are
//!    written after them.
//! 2. A file created or renamed is durable only after [`FileSystem::sync_dir`] of its directory
//!    (POSIX semantics; `SimFs` enforces it, real file systems may be kinder).

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A file's identity on a real file system: its device and inode numbers
/// ([`FileSystem::identity`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileIdentity {
    pub device: u64,
    pub inode: u64,
}

/// Read-only bytes of a whole file: a memory map (`StdFs`) or a buffer (`SimFs`).
pub trait FileBytes: Send + Sync {
    /// The file's contents.
    fn bytes(&self) -> &[u8];
}

impl FileBytes for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
}

impl FileBytes for memmap2::Mmap {
    fn bytes(&self) -> &[u8] {
        self
    }
}

/// The first `len` bytes of a file's bytes.
struct Prefix {
    all: Arc<dyn FileBytes>,
    len: usize,
}

impl FileBytes for Prefix {
    fn bytes(&self) -> &[u8] {
        &self.all.bytes()[..self.len]
    }
}

fn too_short(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("{} is shorter than the part to map", path.display()),
    )
}

/// A file opened for writing.
pub trait WritableFile: Send {
    /// Write every byte at the end of the file (one `write` as far as durability is concerned).
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Write every byte at `offset`, over what is there or past the end (one `pwrite` as far
    /// as durability is concerned).
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()>;
    /// fsync: make every byte written so far durable.
    fn sync(&mut self) -> io::Result<()>;
    /// A second handle on the same file that can fsync it from another thread while this one
    /// goes on writing (a `dup` of the descriptor on a real file system).
    fn sync_handle(&self) -> io::Result<Box<dyn SyncHandle>>;
}

/// Fsyncs one file from any thread ([`WritableFile::sync_handle`]).
pub trait SyncHandle: Send + Sync {
    /// fsync: make every byte written to the file before this call durable.
    fn sync(&self) -> io::Result<()>;
    /// Start writing the file's dirty pages to the disk without waiting for them (a hint:
    /// `sync` alone makes them durable). A thread with several files to fsync starts the
    /// others' while it fsyncs the first, so the disk writes them at once.
    fn start_writeback(&self) -> io::Result<()> {
        Ok(())
    }
}

/// All the file operations the store needs.
pub trait FileSystem: Send + Sync {
    /// Create a directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Names (not paths) of the files in `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// True if `path` exists.
    fn exists(&self, path: &Path) -> bool;
    /// Length of the file in bytes.
    fn len(&self, path: &Path) -> io::Result<u64>;
    /// Create (or truncate to empty) a file for writing.
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>>;
    /// Open an existing file for writing: `write_all` appends at its end, `write_at` writes
    /// anywhere.
    fn open_write(&self, path: &Path) -> io::Result<Box<dyn WritableFile>>;
    /// Open a file for sequential reading.
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>>;
    /// The whole file as bytes that stay valid while the returned value lives (a memory map on
    /// a real file system). The file must never be modified while mapped.
    fn map(&self, path: &Path) -> io::Result<Arc<dyn FileBytes>>;
    /// What names the file at `path` itself, whichever of its names (hard links) it is reached
    /// by, among the files that exist at once: a map of one name then serves another
    /// ([`crate::segment`] shares what it read from a segment file between its names). `None`
    /// where the file system has no such notion (the default; [`SimFs`]).
    fn identity(&self, _path: &Path) -> io::Result<Option<FileIdentity>> {
        Ok(None)
    }
    /// The first `len` bytes of a file, valid while the returned value lives: the file may be
    /// written after them (never within them) meanwhile. An error if the file is shorter.
    fn map_prefix(&self, path: &Path, len: u64) -> io::Result<Arc<dyn FileBytes>> {
        let all = self.map(path)?;
        let len = usize::try_from(len).map_err(|_| too_short(path))?;
        if all.bytes().len() < len {
            return Err(too_short(path));
        }
        Ok(Arc::new(Prefix { all, len }))
    }
    /// Shorten a file to `len` bytes and fsync it.
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()>;
    /// Atomically replace `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Delete a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// fsync a directory so that creations, renames and removals in it are durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;

    /// Give the immutable file `from` a second name `to` (which must not exist): a hard link
    /// where the file system makes one (`Ok(true)`), else a durable copy (`Ok(false)`). Only
    /// for files never written again (segments): a link shares their bytes.
    fn link_or_copy(&self, from: &Path, to: &Path) -> io::Result<bool> {
        let mut r = self.open_read(from)?;
        let mut w = self.create(to)?;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = r.read(&mut buf)?;
            if n == 0 {
                break;
            }
            w.write_all(&buf[..n])?;
        }
        w.sync()?;
        Ok(false)
    }
}

// ---------------------------------------------------------------------------------------------
// StdFs

/// The real file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct StdFs;

struct StdFile(std::fs::File);

impl WritableFile for StdFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf)
    }

    fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        // Not through `write_all`'s cursor: the file is never opened with O_APPEND, under
        // which Linux's pwrite ignores the offset.
        std::os::unix::fs::FileExt::write_all_at(&self.0, buf, offset)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn sync_handle(&self) -> io::Result<Box<dyn SyncHandle>> {
        Ok(Box::new(StdSync(self.0.try_clone()?)))
    }
}

struct StdSync(std::fs::File);

impl SyncHandle for StdSync {
    fn sync(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    #[cfg(target_os = "linux")]
    fn start_writeback(&self) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain syscall on a descriptor this value owns; no memory is passed.
        let r =
            unsafe { libc::sync_file_range(self.0.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl FileSystem for StdFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            if let Some(name) = entry.file_name().to_str() {
                out.push(name.to_string());
            }
        }
        out.sort();
        Ok(out)
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn len(&self, path: &Path) -> io::Result<u64> {
        Ok(std::fs::metadata(path)?.len())
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        Ok(Box::new(StdFile(f)))
    }

    fn open_write(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        use std::io::Seek;
        let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
        f.seek(io::SeekFrom::End(0))?;
        Ok(Box::new(StdFile(f)))
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        Ok(Box::new(std::fs::File::open(path)?))
    }

    fn map(&self, path: &Path) -> io::Result<Arc<dyn FileBytes>> {
        let f = std::fs::File::open(path)?;
        if f.metadata()?.len() == 0 {
            return Ok(Arc::new(Vec::new()));
        }
        // SAFETY: the store never truncates or rewrites the mapped part of a file while a map
        // of it is alive (invariant 1).
        let map = unsafe { memmap2::Mmap::map(&f)? };
        Ok(Arc::new(map))
    }

    fn identity(&self, path: &Path) -> io::Result<Option<FileIdentity>> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path)?;
        Ok(Some(FileIdentity {
            device: m.dev(),
            inode: m.ino(),
        }))
    }

    fn map_prefix(&self, path: &Path, len: u64) -> io::Result<Arc<dyn FileBytes>> {
        let f = std::fs::File::open(path)?;
        if f.metadata()?.len() < len {
            return Err(too_short(path));
        }
        let len = usize::try_from(len).map_err(|_| too_short(path))?;
        if len == 0 {
            return Ok(Arc::new(Vec::new()));
        }
        // SAFETY: as in `map`: the file is written only after these `len` bytes while the map
        // lives (invariant 1).
        let map = unsafe { memmap2::MmapOptions::new().len(len).map(&f)? };
        Ok(Arc::new(map))
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let f = std::fs::OpenOptions::new().write(true).open(path)?;
        f.set_len(len)?;
        f.sync_all()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::File::open(dir)?.sync_all()
    }

    fn link_or_copy(&self, from: &Path, to: &Path) -> io::Result<bool> {
        match std::fs::hard_link(from, to) {
            Ok(()) => Ok(true),
            // Another file system (EXDEV), or one without links: copy.
            Err(e)
                if e.kind() != io::ErrorKind::NotFound
                    && e.kind() != io::ErrorKind::AlreadyExists =>
            {
                std::fs::copy(from, to)?;
                std::fs::File::open(to)?.sync_all()?;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// SimFs

/// The kinds of operation [`SimFs`] can fail on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultOp {
    /// `WritableFile::write_all` (the write is not applied at all).
    Write,
    /// `WritableFile::write_all` applies the first half of the bytes, then fails (as a real
    /// `write` can, on a full disk). Counted separately from `Write`.
    PartialWrite,
    /// `WritableFile::sync` and `FileSystem::truncate` (nothing becomes durable).
    Sync,
    /// `FileSystem::rename`.
    Rename,
    /// `FileSystem::create`.
    Create,
    /// `FileSystem::sync_dir`.
    SyncDir,
}

/// One injected fault: fail the `nth` (1-based, counted from the moment of injection) operation
/// of kind `op`; if `persistent`, every later one too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    pub op: FaultOp,
    pub nth: u64,
    pub persistent: bool,
}

struct Inode {
    data: Vec<u8>,
    /// Contents as of the last successful fsync.
    synced: Vec<u8>,
    /// Global write counter value of the last unsynced write, for torn-write simulation.
    last_write: u64,
    /// The lowest offset written since the last fsync (`usize::MAX`: none), so that an fsync
    /// copies only what changed (a preallocated log is mostly zeros that never change).
    dirty_from: usize,
}

impl Default for Inode {
    fn default() -> Self {
        Inode {
            data: Vec::new(),
            synced: Vec::new(),
            last_write: 0,
            dirty_from: usize::MAX,
        }
    }
}

#[derive(Default)]
struct SimState {
    inodes: Vec<Inode>,
    /// Current directory entries: path -> inode.
    names: BTreeMap<PathBuf, usize>,
    /// Entries as of the last fsync of their directory.
    durable_names: BTreeMap<PathBuf, usize>,
    dirs: std::collections::BTreeSet<PathBuf>,
    faults: Vec<(Fault, u64)>,
    counts: BTreeMap<FaultOp, u64>,
    write_counter: u64,
}

impl SimState {
    fn check(&mut self, op: FaultOp) -> io::Result<()> {
        *self.counts.entry(op).or_insert(0) += 1;
        let mut fail = false;
        for (fault, seen) in self.faults.iter_mut() {
            if fault.op != op {
                continue;
            }
            *seen += 1;
            if *seen == fault.nth || (fault.persistent && *seen > fault.nth) {
                fail = true;
            }
        }
        if fail {
            Err(io::Error::other(format!("injected {op:?} failure")))
        } else {
            Ok(())
        }
    }

    fn inode_of(&self, path: &Path) -> io::Result<usize> {
        self.names.get(path).copied().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} not found", path.display()),
            )
        })
    }
}

/// An in-memory file system with power-cut simulation and fault injection, for tests.
///
/// Cloning gives another handle on the same files.
#[derive(Clone, Default)]
pub struct SimFs {
    state: Arc<Mutex<SimState>>,
}

impl std::fmt::Debug for SimFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimFs").finish_non_exhaustive()
    }
}

impl SimFs {
    /// An empty file system.
    pub fn new() -> SimFs {
        SimFs::default()
    }

    /// Fail an upcoming operation (see [`Fault`]). Faults accumulate until [`SimFs::clear_faults`].
    pub fn inject(&self, fault: Fault) {
        self.state.lock().faults.push((fault, 0));
    }

    /// Remove every injected fault.
    pub fn clear_faults(&self) {
        self.state.lock().faults.clear();
    }

    /// How many operations of this kind were attempted so far (failed ones included).
    pub fn op_count(&self, op: FaultOp) -> u64 {
        self.state.lock().counts.get(&op).copied().unwrap_or(0)
    }

    /// Simulate a power loss: every file goes back to its last fsynced contents, every directory
    /// to its last fsynced entries. With `torn_bytes = Some(n)`, the most recent unsynced write
    /// survives partly: up to `n` of the bytes appended after the last fsync of that file are
    /// kept (for a write over existing bytes: up to `n` bytes from the first changed one). Open
    /// handles from before the cut must not be used afterwards.
    pub fn power_cut(&self, torn_bytes: Option<usize>) {
        let mut st = self.state.lock();
        let latest = st
            .inodes
            .iter()
            .enumerate()
            .filter(|(_, i)| i.data != i.synced)
            .max_by_key(|(_, i)| i.last_write)
            .map(|(n, _)| n);
        for (n, inode) in st.inodes.iter_mut().enumerate() {
            let mut keep = inode.synced.clone();
            if let (Some(extra), Some(l)) = (torn_bytes, latest) {
                if l == n {
                    // The first `extra` bytes from the first one that differs from the synced
                    // contents: the start of an append, or of a write over existing bytes.
                    let from = inode
                        .synced
                        .iter()
                        .zip(&inode.data)
                        .take_while(|(a, b)| a == b)
                        .count();
                    let to = (from + extra).min(inode.data.len());
                    if keep.len() < to {
                        keep.resize(to, 0);
                    }
                    keep[from..to].copy_from_slice(&inode.data[from..to]);
                }
            }
            inode.data = keep.clone();
            inode.synced = keep;
            inode.dirty_from = usize::MAX;
        }
        st.names = st.durable_names.clone();
    }

    /// The current bytes of a file (for damage tests).
    pub fn read_file(&self, path: &Path) -> io::Result<Vec<u8>> {
        let st = self.state.lock();
        let ino = st.inode_of(path)?;
        Ok(st.inodes[ino].data.clone())
    }

    /// Replace a file's bytes, durably (for damage tests: flip bits, zero ranges, append garbage).
    pub fn write_file(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut st = self.state.lock();
        let ino = match st.names.get(path) {
            Some(i) => *i,
            None => {
                st.inodes.push(Inode::default());
                let i = st.inodes.len() - 1;
                st.names.insert(path.to_path_buf(), i);
                st.durable_names.insert(path.to_path_buf(), i);
                i
            }
        };
        st.inodes[ino].data = bytes.to_vec();
        st.inodes[ino].synced = bytes.to_vec();
        st.inodes[ino].dirty_from = usize::MAX;
        Ok(())
    }
}

struct SimFile {
    state: Arc<Mutex<SimState>>,
    inode: usize,
}

impl SimFile {
    /// One write of `buf` at `offset` (`None`: the end), with the injected faults: a `Write`
    /// fault writes nothing, a `PartialWrite` fault writes the first half and fails.
    fn write(&mut self, offset: Option<u64>, buf: &[u8]) -> io::Result<()> {
        let mut st = self.state.lock();
        st.check(FaultOp::Write)?;
        let partial = st.check(FaultOp::PartialWrite);
        st.write_counter += 1;
        let counter = st.write_counter;
        let inode = &mut st.inodes[self.inode];
        inode.last_write = counter;
        let at = match offset {
            Some(o) => usize::try_from(o).map_err(io::Error::other)?,
            None => inode.data.len(),
        };
        let n = if partial.is_ok() {
            buf.len()
        } else {
            buf.len() / 2
        };
        inode.dirty_from = inode.dirty_from.min(at.min(inode.data.len()));
        if inode.data.len() < at + n {
            inode.data.resize(at + n, 0);
        }
        inode.data[at..at + n].copy_from_slice(&buf[..n]);
        partial
    }
}

impl WritableFile for SimFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.write(None, buf)
    }

    fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.write(Some(offset), buf)
    }

    fn sync(&mut self) -> io::Result<()> {
        sim_sync(&self.state, self.inode)
    }

    fn sync_handle(&self) -> io::Result<Box<dyn SyncHandle>> {
        Ok(Box::new(SimFile {
            state: self.state.clone(),
            inode: self.inode,
        }))
    }
}

impl SyncHandle for SimFile {
    fn sync(&self) -> io::Result<()> {
        sim_sync(&self.state, self.inode)
    }
}

fn sim_sync(state: &Mutex<SimState>, inode: usize) -> io::Result<()> {
    let mut st = state.lock();
    st.check(FaultOp::Sync)?;
    let inode = &mut st.inodes[inode];
    if inode.dirty_from != usize::MAX {
        let from = inode.dirty_from.min(inode.synced.len());
        inode.synced.truncate(from);
        inode.synced.extend_from_slice(&inode.data[from..]);
        inode.dirty_from = usize::MAX;
    }
    Ok(())
}

fn parent_of(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

impl FileSystem for SimFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        let mut d = Some(dir);
        while let Some(p) = d {
            st.dirs.insert(p.to_path_buf());
            d = p.parent();
        }
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let st = self.state.lock();
        Ok(st
            .names
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().and_then(|n| n.to_str()).map(str::to_string))
            .collect())
    }

    fn exists(&self, path: &Path) -> bool {
        let st = self.state.lock();
        st.names.contains_key(path) || st.dirs.contains(path)
    }

    fn len(&self, path: &Path) -> io::Result<u64> {
        let st = self.state.lock();
        let ino = st.inode_of(path)?;
        Ok(st.inodes[ino].data.len() as u64)
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let mut st = self.state.lock();
        st.check(FaultOp::Create)?;
        st.inodes.push(Inode::default());
        let ino = st.inodes.len() - 1;
        st.names.insert(path.to_path_buf(), ino);
        Ok(Box::new(SimFile {
            state: self.state.clone(),
            inode: ino,
        }))
    }

    fn open_write(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let st = self.state.lock();
        let ino = st.inode_of(path)?;
        Ok(Box::new(SimFile {
            state: self.state.clone(),
            inode: ino,
        }))
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        let data = self.read_file(path)?;
        Ok(Box::new(io::Cursor::new(data)))
    }

    fn map(&self, path: &Path) -> io::Result<Arc<dyn FileBytes>> {
        Ok(Arc::new(self.read_file(path)?))
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let mut st = self.state.lock();
        st.check(FaultOp::Sync)?;
        let ino = st.inode_of(path)?;
        let inode = &mut st.inodes[ino];
        let len = usize::try_from(len)
            .unwrap_or(usize::MAX)
            .min(inode.data.len());
        inode.data.truncate(len);
        inode.synced = inode.data.clone();
        inode.dirty_from = usize::MAX;
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.check(FaultOp::Rename)?;
        let ino = st.inode_of(from)?;
        st.names.remove(from);
        st.names.insert(to.to_path_buf(), ino);
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.inode_of(path)?;
        st.names.remove(path);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.check(FaultOp::SyncDir)?;
        let dir = dir.to_path_buf();
        st.durable_names.retain(|p, _| parent_of(p) != dir);
        let current: Vec<(PathBuf, usize)> = st
            .names
            .iter()
            .filter(|(p, _)| parent_of(p) == dir)
            .map(|(p, i)| (p.clone(), *i))
            .collect();
        st.durable_names.extend(current);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_cut_keeps_only_synced_bytes_and_synced_names() {
        let fs = SimFs::new();
        let dir = Path::new("/d");
        fs.create_dir_all(dir).unwrap();
        let mut f = fs.create(&dir.join("a")).unwrap();
        f.write_all(b"hello").unwrap();
        f.sync().unwrap();
        fs.sync_dir(dir).unwrap();
        f.write_all(b" world").unwrap();
        let mut g = fs.create(&dir.join("b")).unwrap();
        g.write_all(b"x").unwrap();
        g.sync().unwrap();
        fs.power_cut(None);
        assert_eq!(fs.read_file(&dir.join("a")).unwrap(), b"hello");
        assert!(
            !fs.exists(&dir.join("b")),
            "b's directory entry was never fsynced"
        );
    }

    #[test]
    fn torn_power_cut_keeps_a_prefix_of_the_last_write() {
        let fs = SimFs::new();
        let dir = Path::new("/d");
        let mut f = fs.create(&dir.join("a")).unwrap();
        fs.sync_dir(dir).unwrap();
        f.write_all(b"abc").unwrap();
        f.sync().unwrap();
        f.write_all(b"defgh").unwrap();
        fs.power_cut(Some(2));
        assert_eq!(fs.read_file(&dir.join("a")).unwrap(), b"abcde");
    }

    #[test]
    fn injected_fault_fails_exactly_the_nth_operation() {
        let fs = SimFs::new();
        let mut f = fs.create(Path::new("/a")).unwrap();
        fs.inject(Fault {
            op: FaultOp::Sync,
            nth: 2,
            persistent: false,
        });
        assert!(f.sync().is_ok());
        assert!(f.sync().is_err());
        assert!(f.sync().is_ok());
    }
}
