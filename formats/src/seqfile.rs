//! Hadoop SequenceFile version 6 (`shared/HBASE_FORMATS.md` §2): a [`Writer`] that produces the
//! bytes Hadoop's `SequenceFile.Writer` produces (NONE, RECORD and BLOCK compression with
//! `DefaultCodec` = zlib), and a streaming [`Reader`] of the three layouts.
//!
//! Keys and values are handled as their raw serialized bytes (a serialized
//! `ImmutableBytesWritable`, a length-delimited `Result`, …); [`crate::writable`] builds and
//! parses the common ones.
//!
//! ```no_run
//! use kura_formats::seqfile::{Compression, Reader, Writer};
//! use kura_formats::writable::{ibw, IMMUTABLE_BYTES_WRITABLE, NULL_WRITABLE, NULL};
//! # fn main() -> kura_formats::Result<()> {
//! let mut w = Writer::create("part", IMMUTABLE_BYTES_WRITABLE, NULL_WRITABLE, Compression::None)?;
//! let offset = w.append(&ibw(b"row"), NULL)?; // where the record (or its escape) begins
//! w.finish()?; // flushes and fsyncs
//! let mut r = Reader::open("part")?;
//! while let Some((key, value)) = r.next()? { /* … */ }
//! # Ok(()) }
//! ```
//!
//! # Invariants
//! 1. Header: `SEQ`, 6, key class, value class, compressed?, block?, codec (if compressed),
//!    metadata count 0 (the writer writes no metadata), 16 sync bytes (random per file unless
//!    given).
//! 2. NONE/RECORD writer: `last_sync_pos` starts at 0 (file offset 0, not the header end);
//!    before a record, if `position >= last_sync_pos + SYNC_INTERVAL` a sync escape
//!    (`ff ff ff ff` + sync) is written and `last_sync_pos` set to just after it. No escape at
//!    close. RECORD compresses each value alone into one zlib stream; keys stay raw.
//! 3. BLOCK writer: records are buffered into four buffers (key lengths, keys, value lengths,
//!    values) until keys + values reach [`BLOCK_SIZE`] bytes, and at [`Writer::finish`]; every
//!    block, the first included, is preceded by a sync escape.
//! 4. [`Writer::append`] returns the file offset just before the call: where the record begins,
//!    or the sync escape written in front of it (the offset a MapFile index holds, §5). For
//!    BLOCK files it is the offset where the block being filled will begin.
//! 5. The reader accepts a sync escape before any record at any spacing and checks its 16 bytes
//!    against the header; BLOCK files must have one before each block. A clean end of file is
//!    only at a record (NONE/RECORD) or block (BLOCK) boundary; anything else is an error naming
//!    the file and the offset, never a panic.
//! 6. The reader holds one record (NONE/RECORD) or one decompressed block (BLOCK) in memory, and
//!    refuses any length or decompressed unit above [`MAX_UNIT`] bytes.

use crate::error::Error;
use crate::vint;
use crate::writable::{DEFAULT_CODEC, DEFLATE_CODEC};
use crate::Result;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

/// Bytes of the magic plus version byte: `SEQ` 6.
pub const MAGIC: [u8; 4] = [b'S', b'E', b'Q', 6];
/// Bytes between sync escapes in NONE/RECORD files (Hadoop ≥ 2.9: `5 * 1024 * 20`).
pub const SYNC_INTERVAL: u64 = 5 * 1024 * 20;
/// The int32 that introduces a sync escape.
pub const SYNC_ESCAPE: i32 = -1;
/// Uncompressed keys + values after which a BLOCK writer writes its block
/// (`io.seqfile.compress.blocksize`, default 1 000 000).
pub const BLOCK_SIZE: usize = 1_000_000;
/// Largest record, length or decompressed unit the reader accepts (1 GiB): a corrupt length
/// must not make it allocate without limit.
pub const MAX_UNIT: usize = 1 << 30;

/// How a file's records are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Uncompressed records.
    None,
    /// Each value compressed alone (zlib); keys raw.
    Record,
    /// Records grouped into compressed blocks.
    Block,
}

/// Where a [`Writer`] writes: a `Write` that can also be made durable.
pub trait Sink: Write {
    /// Makes everything written so far durable (after a flush). A no-op for memory.
    fn sync_all(&mut self) -> io::Result<()>;
}

impl Sink for BufWriter<File> {
    fn sync_all(&mut self) -> io::Result<()> {
        self.flush()?;
        self.get_ref().sync_all()
    }
}

impl Sink for File {
    fn sync_all(&mut self) -> io::Result<()> {
        File::sync_all(self)
    }
}

impl Sink for Vec<u8> {
    fn sync_all(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Records buffered for the next block of a BLOCK file.
#[derive(Default)]
struct PendingBlock {
    records: usize,
    key_lens: Vec<u8>,
    keys: Vec<u8>,
    value_lens: Vec<u8>,
    values: Vec<u8>,
}

/// Writes one SequenceFile. See the module doc for the exact layout.
pub struct Writer<W: Sink = BufWriter<File>> {
    out: W,
    /// Name for errors.
    file: String,
    /// Bytes written to `out` so far (flushed or not); a BLOCK file's pending block excluded.
    position: u64,
    last_sync_pos: u64,
    sync: [u8; 16],
    compression: Compression,
    header_len: u64,
    block: PendingBlock,
}

impl Writer<BufWriter<File>> {
    /// Creates (or truncates) `path` and writes the header, with 16 random sync bytes.
    pub fn create(
        path: impl AsRef<Path>,
        key_class: &str,
        value_class: &str,
        compression: Compression,
    ) -> Result<Self> {
        Self::create_with_sync(path, key_class, value_class, compression, rand::random())
    }

    /// As [`Writer::create`] with the given sync bytes (tests comparing bytes use fixed ones).
    pub fn create_with_sync(
        path: impl AsRef<Path>,
        key_class: &str,
        value_class: &str,
        compression: Compression,
        sync: [u8; 16],
    ) -> Result<Self> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let file = File::create(path).map_err(|e| Error::io(&name, e))?;
        Writer::new(
            BufWriter::with_capacity(1 << 16, file),
            &name,
            key_class,
            value_class,
            compression,
            sync,
        )
    }
}

impl<W: Sink> Writer<W> {
    /// Writes the header to `out`; `name` names the stream in errors.
    pub fn new(
        out: W,
        name: &str,
        key_class: &str,
        value_class: &str,
        compression: Compression,
        sync: [u8; 16],
    ) -> Result<Self> {
        let mut header = MAGIC.to_vec();
        write_text(&mut header, key_class)?;
        write_text(&mut header, value_class)?;
        header.push(u8::from(compression != Compression::None));
        header.push(u8::from(compression == Compression::Block));
        if compression != Compression::None {
            write_text(&mut header, DEFAULT_CODEC)?;
        }
        header.extend_from_slice(&0i32.to_be_bytes());
        header.extend_from_slice(&sync);
        let mut w = Writer {
            out,
            file: name.to_string(),
            position: 0,
            last_sync_pos: 0,
            sync,
            compression,
            header_len: header.len() as u64,
            block: PendingBlock::default(),
        };
        w.write(&header)?;
        Ok(w)
    }

    /// Bytes written so far (a BLOCK file's block in progress not included).
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Length of the header (where the first record or escape begins).
    pub fn header_len(&self) -> u64 {
        self.header_len
    }

    /// The 16 sync bytes of this file.
    pub fn sync_bytes(&self) -> [u8; 16] {
        self.sync
    }

    /// Appends one record of raw serialized `key` and `value` bytes; returns the file offset at
    /// which it (or the sync escape written in front of it) begins.
    pub fn append(&mut self, key: &[u8], value: &[u8]) -> Result<u64> {
        let at = self.position;
        let name = self.file.clone();
        let too_long = || Error::Invalid(format!("{name}: a record of 2 GiB or more"));
        let key_len = i32::try_from(key.len()).map_err(|_| too_long())?;
        match self.compression {
            Compression::None | Compression::Record => {
                if self.position >= self.last_sync_pos + SYNC_INTERVAL {
                    self.write_sync_escape()?;
                }
                let compressed;
                let value = if self.compression == Compression::Record {
                    compressed = deflate(value, &self.file)?;
                    &compressed[..]
                } else {
                    value
                };
                let record_len = key
                    .len()
                    .checked_add(value.len())
                    .and_then(|n| i32::try_from(n).ok())
                    .ok_or_else(too_long)?;
                self.write(&record_len.to_be_bytes())?;
                self.write(&key_len.to_be_bytes())?;
                self.write(key)?;
                self.write(value)?;
            }
            Compression::Block => {
                let value_len = i32::try_from(value.len()).map_err(|_| too_long())?;
                let b = &mut self.block;
                vint::write_vint(&mut b.key_lens, key_len);
                b.keys.extend_from_slice(key);
                vint::write_vint(&mut b.value_lens, value_len);
                b.values.extend_from_slice(value);
                b.records += 1;
                if b.keys.len() + b.values.len() >= BLOCK_SIZE {
                    self.write_block()?;
                }
            }
        }
        Ok(at)
    }

    /// Writes what is pending (a BLOCK file's last block), flushes and fsyncs; returns the sink.
    pub fn finish(mut self) -> Result<W> {
        if self.compression == Compression::Block {
            self.write_block()?;
        }
        let file = self.file.clone();
        self.out.flush().map_err(|e| Error::io(&file, e))?;
        self.out.sync_all().map_err(|e| Error::io(&file, e))?;
        Ok(self.out)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.out
            .write_all(bytes)
            .map_err(|e| Error::io(&self.file, e))?;
        self.position += bytes.len() as u64;
        Ok(())
    }

    fn write_sync_escape(&mut self) -> Result<()> {
        if self.last_sync_pos != self.position {
            self.write(&SYNC_ESCAPE.to_be_bytes())?;
            let sync = self.sync;
            self.write(&sync)?;
            self.last_sync_pos = self.position;
        }
        Ok(())
    }

    fn write_block(&mut self) -> Result<()> {
        if self.block.records == 0 {
            return Ok(());
        }
        let block = std::mem::take(&mut self.block);
        self.write_sync_escape()?;
        let records = i32::try_from(block.records)
            .map_err(|_| Error::Invalid(format!("{}: too many records in a block", self.file)))?;
        let mut head = Vec::with_capacity(5);
        vint::write_vint(&mut head, records);
        self.write(&head)?;
        for buffer in [
            &block.key_lens,
            &block.keys,
            &block.value_lens,
            &block.values,
        ] {
            let compressed = deflate(buffer, &self.file)?;
            let len = i32::try_from(compressed.len())
                .map_err(|_| Error::Invalid(format!("{}: a block of 2 GiB or more", self.file)))?;
            let mut prefix = Vec::with_capacity(5);
            vint::write_vint(&mut prefix, len);
            self.write(&prefix)?;
            self.write(&compressed)?;
        }
        Ok(())
    }
}

/// Appends a Hadoop `Text`: VInt byte length, UTF-8 bytes.
fn write_text(out: &mut Vec<u8>, s: &str) -> Result<()> {
    let len = i32::try_from(s.len())
        .map_err(|_| Error::Invalid("a class name of 2 GiB or more".to_string()))?;
    vint::write_vint(out, len);
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

/// One complete zlib stream of `data` at zlib's default level (Java's `Deflater` default).
fn deflate(data: &[u8], file: &str) -> Result<Vec<u8>> {
    let mut enc = flate2::write::ZlibEncoder::new(
        Vec::with_capacity(data.len() / 2 + 16),
        flate2::Compression::default(),
    );
    enc.write_all(data).map_err(|e| Error::io(file, e))?;
    enc.finish().map_err(|e| Error::io(file, e))
}

/// A decompressed block being handed out record by record.
struct OpenBlock {
    key_lens: Vec<usize>,
    keys: Vec<u8>,
    value_lens: Vec<usize>,
    values: Vec<u8>,
    next: usize,
    key_pos: usize,
    value_pos: usize,
}

/// Reads one SequenceFile record by record. See the module doc for what it accepts.
pub struct Reader<R: Read = BufReader<File>> {
    input: R,
    file: String,
    /// Bytes consumed from `input`.
    offset: u64,
    key_class: String,
    value_class: String,
    compression: Compression,
    codec: Option<String>,
    metadata: Vec<(String, String)>,
    sync: [u8; 16],
    header_len: u64,
    /// Offset of the record (NONE/RECORD) or block (BLOCK) the last `next` came from.
    record_offset: u64,
    block: Option<OpenBlock>,
}

impl Reader<BufReader<File>> {
    /// Opens `path` and reads its header.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| Error::io(&name, e))?;
        Reader::new(BufReader::with_capacity(1 << 16, file), &name)
    }
}

impl<R: Read> Reader<R> {
    /// Reads the header from `input`; `name` names the stream in errors.
    pub fn new(input: R, name: &str) -> Result<Self> {
        let mut r = Reader {
            input,
            file: name.to_string(),
            offset: 0,
            key_class: String::new(),
            value_class: String::new(),
            compression: Compression::None,
            codec: None,
            metadata: Vec::new(),
            sync: [0; 16],
            header_len: 0,
            record_offset: 0,
            block: None,
        };
        let mut magic = [0u8; 4];
        let got = r.read_up_to(&mut magic)?;
        if got < 3 || magic[..3] != MAGIC[..3] {
            return Err(Error::NotSequenceFile { file: r.file });
        }
        if got < 4 {
            return Err(r.truncated(3, "the version byte"));
        }
        if magic[3] != 6 {
            return Err(Error::UnsupportedVersion {
                file: r.file,
                version: magic[3],
            });
        }
        r.key_class = r.read_text("the key class")?;
        r.value_class = r.read_text("the value class")?;
        let compressed = r.read_bool("the compression flag")?;
        let block = r.read_bool("the block-compression flag")?;
        r.compression = match (compressed, block) {
            (false, false) => Compression::None,
            (true, false) => Compression::Record,
            (true, true) => Compression::Block,
            (false, true) => {
                return Err(r.corrupt(r.offset - 1, "block compression without compression"))
            }
        };
        if compressed {
            let codec = r.read_text("the codec class")?;
            if codec != DEFAULT_CODEC && codec != DEFLATE_CODEC {
                return Err(Error::UnsupportedCodec {
                    file: r.file,
                    codec,
                });
            }
            r.codec = Some(codec);
        }
        let at = r.offset;
        let pairs = r.read_i32("the metadata count")?;
        if pairs < 0 {
            return Err(r.corrupt(at, &format!("a metadata count of {pairs}")));
        }
        for _ in 0..pairs {
            let k = r.read_text("a metadata key")?;
            let v = r.read_text("a metadata value")?;
            r.metadata.push((k, v));
        }
        let mut sync = [0u8; 16];
        r.read_exact_or(&mut sync, "the sync bytes")?;
        r.sync = sync;
        r.header_len = r.offset;
        Ok(r)
    }

    /// The key class named in the header.
    pub fn key_class(&self) -> &str {
        &self.key_class
    }

    /// The value class named in the header.
    pub fn value_class(&self) -> &str {
        &self.value_class
    }

    /// Fails with [`Error::WrongClasses`] unless the header names these classes.
    pub fn expect_classes(&self, key_class: &str, value_class: &str) -> Result<()> {
        if self.key_class == key_class && self.value_class == value_class {
            return Ok(());
        }
        Err(Error::WrongClasses {
            file: self.file.clone(),
            found_key: self.key_class.clone(),
            found_value: self.value_class.clone(),
            expected_key: key_class.to_string(),
            expected_value: value_class.to_string(),
        })
    }

    /// How the records are stored.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// The codec class, for compressed files.
    pub fn codec(&self) -> Option<&str> {
        self.codec.as_deref()
    }

    /// The header's metadata pairs.
    pub fn metadata(&self) -> &[(String, String)] {
        &self.metadata
    }

    /// The 16 sync bytes from the header.
    pub fn sync_bytes(&self) -> [u8; 16] {
        self.sync
    }

    /// Length of the header.
    pub fn header_len(&self) -> u64 {
        self.header_len
    }

    /// Where the record last returned starts (NONE/RECORD), or the block holding it (BLOCK).
    pub fn record_offset(&self) -> u64 {
        self.record_offset
    }

    /// The file's name as used in errors.
    pub fn name(&self) -> &str {
        &self.file
    }

    /// The next record's raw key and value bytes (values decompressed), or `None` at the end.
    // Not `Iterator`: an error ends the file, which `Result<Option<_>>` says and
    // `Option<Result<_>>` does not.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        match self.compression {
            Compression::None | Compression::Record => self.next_record(),
            Compression::Block => self.next_from_block(),
        }
    }

    fn next_record(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        loop {
            let start = self.offset;
            let Some(len) = self.read_i32_or_eof("a record length")? else {
                return Ok(None);
            };
            if len == SYNC_ESCAPE {
                self.check_sync(start)?;
                continue;
            }
            if len < 0 || len as usize > MAX_UNIT {
                return Err(self.corrupt(start, &format!("a record length of {len}")));
            }
            let key_len = self.read_i32("a key length")?;
            if key_len < 0 || key_len > len {
                return Err(self.corrupt(
                    start + 4,
                    &format!("a key length of {key_len} in a record of {len} bytes"),
                ));
            }
            let key = self.read_vec(key_len as usize, "a key")?;
            let value_at = self.offset;
            let mut value = self.read_vec((len - key_len) as usize, "a value")?;
            if self.compression == Compression::Record {
                value = self.inflate(&value, value_at, "a record-compressed value")?;
            }
            self.record_offset = start;
            return Ok(Some((key, value)));
        }
    }

    fn next_from_block(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        loop {
            if let Some(b) = &mut self.block {
                if b.next < b.key_lens.len() {
                    let (kl, vl) = (b.key_lens[b.next], b.value_lens[b.next]);
                    let key = b.keys[b.key_pos..b.key_pos + kl].to_vec();
                    let value = b.values[b.value_pos..b.value_pos + vl].to_vec();
                    b.key_pos += kl;
                    b.value_pos += vl;
                    b.next += 1;
                    return Ok(Some((key, value)));
                }
                self.block = None;
            }
            let start = self.offset;
            let Some(escape) = self.read_i32_or_eof("a sync escape")? else {
                return Ok(None);
            };
            if escape != SYNC_ESCAPE {
                return Err(self.corrupt(
                    start,
                    &format!("expected the sync escape before a block, found {escape:#010x}"),
                ));
            }
            self.check_sync(start)?;
            self.record_offset = start;
            let count_at = self.offset;
            let count = self.read_vint("a block's record count")?;
            if count < 0 || count as usize > MAX_UNIT {
                return Err(self.corrupt(count_at, &format!("a block of {count} records")));
            }
            let count = count as usize;
            let key_lens = self.read_compressed("a block's key lengths")?;
            let keys = self.read_compressed("a block's keys")?;
            let value_lens = self.read_compressed("a block's value lengths")?;
            let values = self.read_compressed("a block's values")?;
            let key_lens = self.lengths(&key_lens, count, keys.len(), start, "key")?;
            let value_lens = self.lengths(&value_lens, count, values.len(), start, "value")?;
            self.block = Some(OpenBlock {
                key_lens,
                keys,
                value_lens,
                values,
                next: 0,
                key_pos: 0,
                value_pos: 0,
            });
        }
    }

    /// Parses `count` VInt lengths that must add up to `total`.
    fn lengths(
        &self,
        buf: &[u8],
        count: usize,
        total: usize,
        block_at: u64,
        what: &str,
    ) -> Result<Vec<usize>> {
        let mut out = Vec::with_capacity(count.min(buf.len()));
        let mut pos = 0;
        let mut sum = 0usize;
        for _ in 0..count {
            let (len, n) = vint::read_vint(&buf[pos..])
                .map_err(|e| self.corrupt(block_at, &format!("the block's {what} lengths: {e}")))?;
            if len < 0 {
                return Err(self.corrupt(block_at, &format!("a {what} length of {len}")));
            }
            pos += n;
            sum += len as usize;
            out.push(len as usize);
        }
        if pos != buf.len() || sum != total {
            return Err(self.corrupt(
                block_at,
                &format!(
                    "the block's {count} {what} lengths add up to {sum} bytes, its {what}s hold {total}"
                ),
            ));
        }
        Ok(out)
    }

    fn read_compressed(&mut self, what: &str) -> Result<Vec<u8>> {
        let at = self.offset;
        let len = self.read_vint(what)?;
        if len < 0 || len as usize > MAX_UNIT {
            return Err(self.corrupt(at, &format!("{what}: a length of {len}")));
        }
        let data = self.read_vec(len as usize, what)?;
        self.inflate(&data, at, what)
    }

    fn check_sync(&mut self, at: u64) -> Result<()> {
        let mut sync = [0u8; 16];
        self.read_exact_or(&mut sync, "the sync bytes of an escape")?;
        if sync != self.sync {
            return Err(self.corrupt(at, "a sync escape whose 16 bytes differ from the header's"));
        }
        Ok(())
    }

    fn inflate(&self, data: &[u8], at: u64, what: &str) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut dec = flate2::read::ZlibDecoder::new(data).take(MAX_UNIT as u64 + 1);
        dec.read_to_end(&mut out)
            .map_err(|e| self.corrupt(at, &format!("{what} is not a valid zlib stream: {e}")))?;
        if out.len() > MAX_UNIT {
            return Err(self.corrupt(at, &format!("{what} inflates to more than 1 GiB")));
        }
        Ok(out)
    }

    fn corrupt(&self, offset: u64, what: &str) -> Error {
        Error::Corrupt {
            file: self.file.clone(),
            offset,
            what: what.to_string(),
        }
    }

    fn truncated(&self, offset: u64, what: &str) -> Error {
        Error::Truncated {
            file: self.file.clone(),
            offset,
            what: format!("the file ends inside {what}"),
        }
    }

    /// Reads until `buf` is full or the input ends; how many bytes were read.
    fn read_up_to(&mut self, buf: &mut [u8]) -> Result<usize> {
        let mut got = 0;
        while got < buf.len() {
            match self.input.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(&self.file, e)),
            }
        }
        self.offset += got as u64;
        Ok(got)
    }

    fn read_exact_or(&mut self, buf: &mut [u8], what: &str) -> Result<()> {
        let at = self.offset;
        if self.read_up_to(buf)? < buf.len() {
            return Err(self.truncated(at, what));
        }
        Ok(())
    }

    fn read_i32(&mut self, what: &str) -> Result<i32> {
        let mut b = [0u8; 4];
        self.read_exact_or(&mut b, what)?;
        Ok(i32::from_be_bytes(b))
    }

    /// An int32, or `None` if the input ends before its first byte.
    fn read_i32_or_eof(&mut self, what: &str) -> Result<Option<i32>> {
        let at = self.offset;
        let mut b = [0u8; 4];
        match self.read_up_to(&mut b)? {
            0 => Ok(None),
            4 => Ok(Some(i32::from_be_bytes(b))),
            _ => Err(self.truncated(at, what)),
        }
    }

    fn read_bool(&mut self, what: &str) -> Result<bool> {
        let at = self.offset;
        let mut b = [0u8; 1];
        self.read_exact_or(&mut b, what)?;
        match b[0] {
            0 => Ok(false),
            1 => Ok(true),
            x => Err(self.corrupt(at, &format!("{what} is {x:#04x}, not a boolean"))),
        }
    }

    fn read_vint(&mut self, what: &str) -> Result<i32> {
        let at = self.offset;
        let mut b0 = [0u8; 1];
        self.read_exact_or(&mut b0, what)?;
        let mut rest = [0u8; 8];
        let n = vint::extra_bytes(b0[0]);
        self.read_exact_or(&mut rest[..n], what)?;
        let v = vint::decode_parts(b0[0], &rest[..n]);
        i32::try_from(v).map_err(|_| self.corrupt(at, &format!("{what}: {v} does not fit a VInt")))
    }

    /// Reads `len` bytes, growing the buffer as data arrives (a corrupt length cannot make it
    /// allocate more than the file holds).
    fn read_vec(&mut self, len: usize, what: &str) -> Result<Vec<u8>> {
        let at = self.offset;
        let mut out = Vec::with_capacity(len.min(1 << 20));
        let got = (&mut self.input)
            .take(len as u64)
            .read_to_end(&mut out)
            .map_err(|e| Error::io(&self.file, e))?;
        self.offset += got as u64;
        if got < len {
            return Err(self.truncated(at, &format!("{what} of {len} bytes")));
        }
        Ok(out)
    }

    fn read_text(&mut self, what: &str) -> Result<String> {
        let at = self.offset;
        let len = self.read_vint(what)?;
        if len < 0 || len as usize > MAX_UNIT {
            return Err(self.corrupt(at, &format!("{what}: a length of {len}")));
        }
        let bytes = self.read_vec(len as usize, what)?;
        String::from_utf8(bytes).map_err(|_| self.corrupt(at, &format!("{what} is not UTF-8")))
    }
}

#[cfg(test)]
mod tests;
