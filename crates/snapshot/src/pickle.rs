//! A pickle reader that never executes anything.
//!
//! It reads the data-only subset of the pickle format that `pickle.dump` writes for plain
//! Python values (protocols 2 to 5): `None`, booleans, ints of any width, floats, `str`,
//! `bytes`, tuples, lists, dicts and sets, with `FRAME` and every memo opcode. Every opcode that
//! would import or call Python code (`GLOBAL`, `STACK_GLOBAL`, `REDUCE`, `BUILD`, `INST`, `OBJ`,
//! `NEWOBJ`, `NEWOBJ_EX`, `PERSID`, `BINPERSID`, `EXT1/2/4`, out-of-band buffers) is refused
//! with an error naming the opcode and its byte offset; so are the text opcodes of protocol 0.
//!
//! # Why not `serde-pickle`
//! `serde-pickle` 1.2 was evaluated first. It reads protocols 2 to 5 and wide ints, but it
//! resolves every memo reference by deep-cloning the memoized value: a PyTorch snapshot shares
//! one frames list between many trace entries, so a 1,048,576-entry trace would hold a private
//! copy of ~10 frame dicts per entry. It also materialises the whole generic value tree (with
//! a `BigInt` and a `String` per value) before any analysis can start, interprets some globals
//! (`builtins.set`, `bytearray`, `encoding`) instead of refusing them, and has no nesting limit.
//! This reader instead hands each value to a [`Build`] implementation, so the caller decides
//! what a value becomes (the snapshot model turns trace-entry dicts into 32-byte records and
//! interns frames as it reads), and a memo reference is one clone of whatever the builder
//! returned: references cost O(1), whatever they point to.
//!
//! # Contract
//! - Input is read once, front to back, through a fixed 256 KiB buffer; nothing after `STOP`
//!   is read. `FRAME` lengths are read and ignored (framing is only a buffering hint).
//! - A declared length never causes a preallocation: long strings grow as bytes arrive, so a
//!   length larger than the file fails as a truncation.
//! - Lists, tuples and sets are filled through [`Build::push`], so the builder decides what an
//!   item costs (the snapshot model keeps a run of trace entries as two numbers); dicts are
//!   handed over whole. A flat dict (only scalars and memo references, as every trace entry
//!   and frame is) is read straight from the buffer without touching the pickle stack.
//! - Containers are handed to the builder once: when they leave the stack (appended to a
//!   parent, set into a dict, or popped by `STOP`), or earlier, when a memo reference to them
//!   is read (`pickle.dump` writes a container's items right after creating it, so it is
//!   complete by then). Adding items to a container after that is refused: only a
//!   self-referencing structure does it.
//! - The memo costs 16 bytes a slot, and nothing for slots that hold a run of values the
//!   builder numbers in order ([`Build::run_value`]).
//! - Limits: nesting depth [`MAX_DEPTH`], stack length [`MAX_STACK`], memo size [`MAX_MEMO`],
//!   string length [`MAX_BYTES`];
//!   the builder may refuse a value too ([`Build`] methods return `Err(reason)`). Every failure
//!   is one [`PickleError`] whose `Display` is one line with a byte offset.
//! - Memory: what the reader itself allocates (memo chunks, stack growth, open dicts' items,
//!   strings longer than the buffer) is charged to [`Build::charge`] before or as it grows, in
//!   bulk (a memo chunk, a doubling of the stack, a batch of items), so a builder that keeps a
//!   budget bounds the whole read.

use std::io::{self, Read};

/// Deepest nesting of containers accepted; PyTorch snapshots nest 6 levels.
pub const MAX_DEPTH: u16 = 256;
/// Most items on the pickle stack at once (marks included).
pub const MAX_STACK: usize = 1 << 22;
/// Most memo slots (16 bytes each); a 10,000,000-entry snapshot uses about 10 million.
pub const MAX_MEMO: usize = 1 << 26;
/// The longest string, bytes or int read (16 MiB); a snapshot's longest are C++ names.
pub const MAX_BYTES: usize = 16 << 20;
/// How far past the end of the memo a `BINPUT`/`LONG_BINPUT` index may jump.
const MAX_MEMO_GAP: usize = 1 << 16;
const BUFFER_BYTES: usize = 256 * 1024;
/// The longest flat dict read in one piece from the buffer; longer ones take the general path.
const FLAT_DICT_WINDOW: usize = 4096;

/// Why a pickle could not be read. Each variant prints as one line naming the byte offset.
#[derive(Debug, thiserror::Error)]
pub enum PickleError {
    /// An opcode that would import or call Python code.
    #[error(
        "refused pickle opcode {name} at byte {offset}: it would import or run Python code, which memprints never does"
    )]
    Refused {
        /// The opcode's pickletools name.
        name: &'static str,
        /// Where it is.
        offset: u64,
    },
    /// A text opcode of protocol 0 or 1.
    #[error(
        "unsupported pickle opcode {name} at byte {offset}: only binary protocols 2 to 5 are read"
    )]
    Unsupported {
        /// The opcode's pickletools name.
        name: &'static str,
        /// Where it is.
        offset: u64,
    },
    /// A byte that is no opcode at all (often: the file is compressed in a way not recognised).
    #[error("unknown pickle opcode 0x{code:02x} at byte {offset}")]
    UnknownOpcode {
        /// The byte.
        code: u8,
        /// Where it is.
        offset: u64,
    },
    /// The input ended inside an opcode.
    #[error("pickle is truncated: input ends at byte {offset} inside {opcode}")]
    Truncated {
        /// What was being read.
        opcode: &'static str,
        /// Where the input ends.
        offset: u64,
    },
    /// The opcodes do not make a value.
    #[error("malformed pickle: {opcode} at byte {offset}: {reason}")]
    Malformed {
        /// The opcode being run.
        opcode: &'static str,
        /// Where it is.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A limit of the reader or of the builder.
    #[error("pickle exceeds a limit: {opcode} at byte {offset}: {reason}")]
    Limit {
        /// The opcode being run.
        opcode: &'static str,
        /// Where it is.
        offset: u64,
        /// Which limit, and its value.
        reason: String,
    },
    /// Reading the input failed.
    #[error("reading the pickle failed at byte {offset}: {source}")]
    Io {
        /// How far reading got.
        offset: u64,
        /// What the system said.
        source: io::Error,
    },
}

/// Turns pickle values into the caller's representation.
///
/// Values are cloned once per memo reference, so `Value` should be cheap to clone (a `Copy`
/// handle, an `Rc`). Tuples, lists, sets and frozensets are filled through [`Build::push`] and
/// finished by [`Build::list`]. A method returning `Err(reason)` stops the reader with a
/// [`PickleError::Limit`] naming the opcode, its offset and `reason`.
pub trait Build {
    /// What a finished value becomes.
    type Value: Clone + PartialEq;
    /// A list, tuple or set being filled.
    type List;
    /// `None`.
    fn none(&mut self) -> Self::Value;
    /// `True` or `False`.
    fn bool(&mut self, value: bool) -> Self::Value;
    /// An int that fits an `i64`.
    fn int(&mut self, value: i64) -> Self::Value;
    /// An int that does not fit an `i64`, as little-endian two's complement (at least 9 bytes).
    fn big_int(&mut self, le_bytes: &[u8]) -> Self::Value;
    /// A float.
    fn float(&mut self, value: f64) -> Self::Value;
    /// A `str` (lone surrogates replaced).
    fn str(&mut self, value: &str) -> Self::Value;
    /// A `bytes` or `bytearray`.
    fn bytes(&mut self, value: &[u8]) -> Self::Value;
    /// An empty list, tuple or set to [`Build::push`] items into.
    fn new_list(&mut self) -> Self::List;
    /// Adds `item` at the end of `list`.
    fn push(&mut self, list: &mut Self::List, item: Self::Value) -> Result<(), String>;
    /// The finished list (`tuple`: it was a tuple).
    fn list(&mut self, list: Self::List, tuple: bool) -> Result<Self::Value, String>;
    /// A dict of `items` in order. The builder may take the items out; the caller clears
    /// `items` afterwards and reuses it.
    fn dict(&mut self, items: &mut Vec<(Self::Value, Self::Value)>) -> Result<Self::Value, String>;
    /// The value `offset` places after `first` in a run of values that follow one another,
    /// such as records numbered in the order they were read; `None` if `first` starts none.
    /// The memo keeps a run of consecutive slots holding such values as its first value and
    /// a count (a trace's entry dicts are memoized one after another).
    fn run_value(&self, _first: &Self::Value, _offset: u32) -> Option<Self::Value> {
        None
    }
    /// Charges `bytes` the reader allocates for itself (memo, stack, open dicts, long strings)
    /// to the builder's memory budget; `Err(reason)` stops the reader like any refusal.
    fn charge(&mut self, _bytes: usize) -> Result<(), String> {
        Ok(())
    }
    /// Whether the budget ran out in a method that cannot fail ([`Build::str`] and the other
    /// scalars): the reader then stops at its next push.
    fn over_budget(&self) -> bool {
        false
    }
}

/// Reads one pickle from `input` and returns the builder's value for its top-level object.
pub fn read<R: Read, B: Build>(input: R, builder: &mut B) -> Result<B::Value, PickleError> {
    let placeholder = builder.none();
    Machine {
        input: Input::new(input),
        memo: Memo {
            chunks: Vec::new(),
            len: 0,
            placeholder: placeholder.clone(),
            bytes: 0,
        },
        memo_charged: 0,
        stack_room: 0,
        long_charged: 0,
        placeholder,
        builder,
        stack: Vec::new(),
        marks: Vec::new(),
        scratch: Vec::new(),
        offset: 0,
        code: 0,
    }
    .run()
    .map_err(|e| *e)
}

/// A generic pickle value, for tests and small files. Shared memo references share the `Rc`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `None`.
    None,
    /// `True` or `False`.
    Bool(bool),
    /// An int that fits an `i64`.
    Int(i64),
    /// Little-endian two's complement, for ints wider than an `i64`.
    BigInt(std::rc::Rc<[u8]>),
    /// A float.
    Float(f64),
    /// A `str`.
    Str(std::rc::Rc<str>),
    /// A `bytes` or `bytearray`.
    Bytes(std::rc::Rc<[u8]>),
    /// A tuple.
    Tuple(std::rc::Rc<[Value]>),
    /// A list, set or frozenset.
    List(std::rc::Rc<[Value]>),
    /// A dict, items in order.
    Dict(std::rc::Rc<[(Value, Value)]>),
}

/// Builds [`Value`]s.
pub struct ValueBuilder;

impl Build for ValueBuilder {
    type Value = Value;
    type List = Vec<Value>;
    fn none(&mut self) -> Value {
        Value::None
    }
    fn bool(&mut self, value: bool) -> Value {
        Value::Bool(value)
    }
    fn int(&mut self, value: i64) -> Value {
        Value::Int(value)
    }
    fn big_int(&mut self, le_bytes: &[u8]) -> Value {
        Value::BigInt(le_bytes.into())
    }
    fn float(&mut self, value: f64) -> Value {
        Value::Float(value)
    }
    fn str(&mut self, value: &str) -> Value {
        Value::Str(value.into())
    }
    fn bytes(&mut self, value: &[u8]) -> Value {
        Value::Bytes(value.into())
    }
    fn new_list(&mut self) -> Vec<Value> {
        Vec::new()
    }
    fn push(&mut self, list: &mut Vec<Value>, item: Value) -> Result<(), String> {
        list.push(item);
        Ok(())
    }
    fn list(&mut self, list: Vec<Value>, tuple: bool) -> Result<Value, String> {
        Ok(if tuple {
            Value::Tuple(list.into())
        } else {
            Value::List(list.into())
        })
    }
    fn dict(&mut self, items: &mut Vec<(Value, Value)>) -> Result<Value, String> {
        Ok(Value::Dict(std::mem::take(items).into()))
    }
}

/// Decodes a little-endian two's complement integer of any width: `Ok(i64)` when it fits,
/// otherwise `Err` with the bytes trimmed of redundant sign bytes (at least 9 remain).
pub fn decode_long(le_bytes: &[u8]) -> Result<i64, &[u8]> {
    let Some(&last) = le_bytes.last() else {
        return Ok(0);
    };
    let sign_byte = if last & 0x80 != 0 { 0xff } else { 0x00 };
    let mut len = le_bytes.len();
    // Keep one byte whose top bit still carries the sign.
    while len > 1
        && le_bytes[len - 1] == sign_byte
        && (le_bytes[len - 2] & 0x80) == (sign_byte & 0x80)
    {
        len -= 1;
    }
    let trimmed = &le_bytes[..len];
    if len > 8 {
        return Err(trimmed);
    }
    let mut buf = [sign_byte; 8];
    buf[..len].copy_from_slice(trimmed);
    Ok(i64::from_le_bytes(buf))
}

/// The int of the first `n` (1 to 8) bytes of `eight`, little-endian two's complement: what
/// [`decode_long`] gives for `&eight[..n]`, without its byte loop and copy. The flat-dict path
/// reads every trace entry's address and time this way (two `LONG1`s an entry).
#[inline(always)]
fn short_long(eight: [u8; 8], n: usize) -> i64 {
    debug_assert!((1..=8).contains(&n));
    // Shift the n bytes to the top, then back down with the sign: the bytes after them fall off.
    let shift = 64 - 8 * n as u32;
    (i64::from_le_bytes(eight) << shift) >> shift
}

/// The name pickletools gives an opcode byte, if it is one.
pub fn opcode_name(code: u8) -> Option<&'static str> {
    Some(match code {
        b'(' => "MARK",
        b'.' => "STOP",
        b'0' => "POP",
        b'1' => "POP_MARK",
        b'2' => "DUP",
        b'F' => "FLOAT",
        b'I' => "INT",
        b'J' => "BININT",
        b'K' => "BININT1",
        b'L' => "LONG",
        b'M' => "BININT2",
        b'N' => "NONE",
        b'P' => "PERSID",
        b'Q' => "BINPERSID",
        b'R' => "REDUCE",
        b'S' => "STRING",
        b'T' => "BINSTRING",
        b'U' => "SHORT_BINSTRING",
        b'V' => "UNICODE",
        b'X' => "BINUNICODE",
        b'a' => "APPEND",
        b'b' => "BUILD",
        b'c' => "GLOBAL",
        b'd' => "DICT",
        b'}' => "EMPTY_DICT",
        b'e' => "APPENDS",
        b'g' => "GET",
        b'h' => "BINGET",
        b'i' => "INST",
        b'j' => "LONG_BINGET",
        b'l' => "LIST",
        b']' => "EMPTY_LIST",
        b'o' => "OBJ",
        b'p' => "PUT",
        b'q' => "BINPUT",
        b'r' => "LONG_BINPUT",
        b's' => "SETITEM",
        b't' => "TUPLE",
        b')' => "EMPTY_TUPLE",
        b'u' => "SETITEMS",
        b'G' => "BINFLOAT",
        0x80 => "PROTO",
        0x81 => "NEWOBJ",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        0x85 => "TUPLE1",
        0x86 => "TUPLE2",
        0x87 => "TUPLE3",
        0x88 => "NEWTRUE",
        0x89 => "NEWFALSE",
        0x8a => "LONG1",
        0x8b => "LONG4",
        b'B' => "BINBYTES",
        b'C' => "SHORT_BINBYTES",
        0x8c => "SHORT_BINUNICODE",
        0x8d => "BINUNICODE8",
        0x8e => "BINBYTES8",
        0x8f => "EMPTY_SET",
        0x90 => "ADDITEMS",
        0x91 => "FROZENSET",
        0x92 => "NEWOBJ_EX",
        0x93 => "STACK_GLOBAL",
        0x94 => "MEMOIZE",
        0x95 => "FRAME",
        0x96 => "BYTEARRAY8",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        _ => return None,
    })
}

/// A buffered byte source that knows its absolute offset.
///
/// Reads return `None` at the end of input and after a read error, which is kept in `error`
/// until [`Machine::input_failed`] turns it into the [`PickleError`] (naming the opcode) — so
/// the per-byte path carries no error value.
struct Input<R> {
    inner: R,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    /// Absolute offset of `buf[0]`.
    base: u64,
    /// Holds strings longer than the buffer.
    long: Vec<u8>,
    /// Where the bytes of the last [`Input::load`] are: `buf[start..start + len]`, or `long`.
    loaded: Option<(usize, usize)>,
    /// The read error that ended the input, with its offset.
    error: Option<(u64, io::Error)>,
    /// The last [`Input::load`] stopped at [`MAX_BYTES`].
    too_long: bool,
}

impl<R: Read> Input<R> {
    fn new(inner: R) -> Self {
        Input {
            inner,
            buf: vec![0; BUFFER_BYTES].into_boxed_slice(),
            pos: 0,
            end: 0,
            base: 0,
            long: Vec::new(),
            loaded: None,
            error: None,
            too_long: false,
        }
    }

    #[inline]
    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Makes at least `n` (≤ buffer size) bytes available; `false` at end of input or on a read
    /// error (kept in `error`).
    #[cold]
    #[inline(never)]
    fn fill(&mut self, n: usize) -> bool {
        if self.error.is_some() {
            return false;
        }
        while self.end - self.pos < n {
            if self.pos > 0 {
                self.buf.copy_within(self.pos..self.end, 0);
                self.base += self.pos as u64;
                self.end -= self.pos;
                self.pos = 0;
            }
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => return false,
                Ok(read) => self.end += read,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    self.error = Some((self.offset(), source));
                    return false;
                }
            }
        }
        true
    }

    /// The buffered bytes from the current position: at least `n` (≤ buffer size) unless the
    /// input ends or fails first (a failure is kept for the next read to report).
    #[inline]
    fn window(&mut self, n: usize) -> &[u8] {
        if self.end - self.pos < n {
            self.fill(n);
        }
        &self.buf[self.pos..self.end]
    }

    #[inline(always)]
    fn byte(&mut self) -> Option<u8> {
        if self.pos == self.end && !self.fill(1) {
            return None;
        }
        let b = self.buf[self.pos];
        self.pos += 1;
        Some(b)
    }

    #[inline(always)]
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        if self.end - self.pos < N && !self.fill(N) {
            return None;
        }
        let mut out = [0; N];
        out.copy_from_slice(&self.buf[self.pos..self.pos + N]);
        self.pos += N;
        Some(out)
    }

    /// Reads exactly `n` bytes, then readable with [`Input::loaded`]. Never allocates more than
    /// the bytes actually present.
    #[inline]
    fn load(&mut self, n: u64) -> bool {
        if n <= (self.end - self.pos) as u64 {
            let start = self.pos;
            self.pos += n as usize;
            self.loaded = Some((start, n as usize));
            return true;
        }
        self.load_slow(n)
    }

    #[inline(never)]
    fn load_slow(&mut self, n: u64) -> bool {
        if n <= self.buf.len() as u64 {
            let n = n as usize;
            if self.end - self.pos < n && !self.fill(n) {
                return false;
            }
            let start = self.pos;
            self.pos += n;
            self.loaded = Some((start, n));
            return true;
        }
        self.loaded = None;
        self.long.clear();
        self.long.extend_from_slice(&self.buf[self.pos..self.end]);
        self.base += self.end as u64;
        self.pos = 0;
        self.end = 0;
        let want = n - self.long.len() as u64;
        // Read no more than one byte past the limit: a long declared length with few bytes
        // behind it still reads as a truncation.
        let most = want.min((MAX_BYTES + 1).saturating_sub(self.long.len()) as u64);
        let got = match (&mut self.inner).take(most).read_to_end(&mut self.long) {
            Ok(got) => got,
            Err(source) => {
                self.error = Some((self.base, source));
                return false;
            }
        };
        self.base += got as u64;
        if self.long.len() > MAX_BYTES {
            self.too_long = true;
            return false;
        }
        (got as u64) >= want
    }

    /// The bytes of the last successful [`Input::load`].
    #[inline]
    fn loaded(&self) -> &[u8] {
        match self.loaded {
            Some((start, len)) => &self.buf[start..start + len],
            None => &self.long,
        }
    }
}

/// One slot of the pickle stack. Containers stay open (mutable) until they leave the stack.
/// `u16` is the nesting depth; an open container's `u32` is its memo index, or [`NO_MEMO`].
/// `repr(C, u64)` keeps each variant's fields at fixed, word-aligned offsets, so slots move as
/// whole words: with the default layout the compiler copied them in odd-sized, overlapping
/// pieces, which stalled store forwarding on every push (~15% of a run).
#[repr(C, u64)]
enum Slot<V, L> {
    Mark,
    Value(V, u16),
    List(L, u16, u32),
    Dict(Vec<(V, V)>, u16, u32),
}

const NO_MEMO: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MemoState {
    Empty,
    /// A container still open at stack index `aux`.
    Open,
    /// Another index for the same open container (memoized twice); `aux` is the first index.
    Alias,
    /// A finished value of depth `aux`.
    Ready,
}

/// One memo slot: 16 bytes with an 8-byte value. `value` is a placeholder unless `state` is
/// [`MemoState::Ready`].
#[derive(Clone)]
struct MemoEntry<V> {
    value: V,
    aux: u32,
    state: MemoState,
}

/// Memo slots per [`MemoChunk`].
const MEMO_CHUNK: usize = 1024;

/// A chunk of memo slots: listed, or (while its slots so far hold one run of values, see
/// [`Build::run_value`]) only the run's first value, depth and length.
enum MemoChunk<V> {
    Run { first: V, depth: u16, len: u32 },
    Slots(Vec<MemoEntry<V>>),
}

/// What a chunk of listed memo slots costs, for [`Build::charge`].
#[allow(non_snake_case)]
const fn MEMO_CHUNK_BYTES<V>() -> usize {
    MEMO_CHUNK * size_of::<MemoEntry<V>>() + size_of::<MemoChunk<V>>()
}

/// The memo, in chunks of [`MEMO_CHUNK`] slots.
struct Memo<V> {
    chunks: Vec<MemoChunk<V>>,
    /// One past the highest slot stored.
    len: usize,
    /// The value of slots that hold none.
    placeholder: V,
    /// Bytes of the slot chunks allocated so far (a listed chunk counts whole).
    bytes: usize,
}

impl<V: Clone + PartialEq> Memo<V> {
    fn len(&self) -> usize {
        self.len
    }

    /// Slot `index`, unless it is empty.
    #[inline]
    fn get<B: Build<Value = V>>(&self, index: usize, builder: &B) -> Option<MemoEntry<V>> {
        match self.chunks.get(index / MEMO_CHUNK)? {
            MemoChunk::Slots(slots) => slots
                .get(index % MEMO_CHUNK)
                .filter(|m| m.state != MemoState::Empty)
                .cloned(),
            MemoChunk::Run { first, depth, len } => {
                let offset = (index % MEMO_CHUNK) as u32;
                (offset < *len).then(|| MemoEntry {
                    value: builder
                        .run_value(first, offset)
                        .expect("a run's values exist"),
                    aux: (*depth).into(),
                    state: MemoState::Ready,
                })
            }
        }
    }

    /// The value and depth in slot `index` when it holds a finished value: [`Memo::get`] for
    /// the flat-dict path, which needs nothing else, in one test of the state.
    #[inline(always)]
    fn ready<B: Build<Value = V>>(&self, index: usize, builder: &B) -> Option<(V, u16)> {
        match self.chunks.get(index / MEMO_CHUNK)? {
            MemoChunk::Slots(slots) => {
                let m = slots.get(index % MEMO_CHUNK)?;
                (m.state == MemoState::Ready).then(|| (m.value.clone(), m.aux as u16))
            }
            MemoChunk::Run { first, depth, len } => {
                let offset = (index % MEMO_CHUNK) as u32;
                (offset < *len).then(|| {
                    let value = builder.run_value(first, offset);
                    (value.expect("a run's values exist"), *depth)
                })
            }
        }
    }

    /// Stores `entry` at slot `index` (the caller checked the limits).
    #[inline(always)]
    fn set<B: Build<Value = V>>(&mut self, index: usize, entry: MemoEntry<V>, builder: &B) {
        // The next value of a run (a trace's next entry dict), inlined where the reader
        // memoizes one; [`Memo::set_other`] does the same for it, more slowly.
        if index == self.len
            && entry.state == MemoState::Ready
            && let Some(MemoChunk::Run { first, depth, len }) =
                self.chunks.get_mut(index / MEMO_CHUNK)
            && index % MEMO_CHUNK == *len as usize
            && entry.aux == u32::from(*depth)
            && builder.run_value(first, *len).as_ref() == Some(&entry.value)
        {
            *len += 1;
            self.len += 1;
            return;
        }
        self.set_other(index, entry, builder);
    }

    /// [`Memo::set`] of anything.
    #[inline(never)]
    fn set_other<B: Build<Value = V>>(&mut self, index: usize, entry: MemoEntry<V>, builder: &B) {
        let (c, offset) = (index / MEMO_CHUNK, index % MEMO_CHUNK);
        let ready = entry.state == MemoState::Ready;
        if index == self.len && offset == 0 && c == self.chunks.len() {
            self.len += 1;
            let runs = ready && builder.run_value(&entry.value, 0).as_ref() == Some(&entry.value);
            self.bytes += if runs {
                size_of::<MemoChunk<V>>()
            } else {
                MEMO_CHUNK_BYTES::<V>()
            };
            self.chunks.push(if runs {
                MemoChunk::Run {
                    first: entry.value,
                    depth: entry.aux as u16,
                    len: 1,
                }
            } else {
                let mut slots = Vec::with_capacity(MEMO_CHUNK);
                slots.push(entry);
                MemoChunk::Slots(slots)
            });
            return;
        }
        while self.chunks.len() <= c {
            self.chunks.push(MemoChunk::Slots(Vec::new()));
            self.bytes += MEMO_CHUNK_BYTES::<V>();
        }
        if let MemoChunk::Run { first, depth, len } = &mut self.chunks[c] {
            if index == self.len
                && offset == *len as usize
                && ready
                && entry.aux == u32::from(*depth)
                && builder.run_value(first, *len).as_ref() == Some(&entry.value)
            {
                *len += 1;
                self.len += 1;
                return;
            }
            // Anything else in the chunk: list its slots.
            self.bytes += MEMO_CHUNK_BYTES::<V>();
            let slots = (0..*len)
                .map(|k| MemoEntry {
                    value: builder.run_value(first, k).expect("a run's values exist"),
                    aux: u32::from(*depth),
                    state: MemoState::Ready,
                })
                .collect();
            self.chunks[c] = MemoChunk::Slots(slots);
        }
        let MemoChunk::Slots(slots) = &mut self.chunks[c] else {
            unreachable!("listed above")
        };
        if slots.len() <= offset {
            let placeholder = &self.placeholder;
            slots.resize_with(offset + 1, || MemoEntry {
                value: placeholder.clone(),
                aux: 0,
                state: MemoState::Empty,
            });
        }
        slots[offset] = entry;
        self.len = self.len.max(index + 1);
    }
}

/// The machine's error: boxed, so that every `Result` on the hot path is one register.
type Fail = Box<PickleError>;

struct Machine<'b, R, B: Build> {
    input: Input<R>,
    builder: &'b mut B,
    /// Stands in for the value of memo slots that hold none.
    placeholder: B::Value,
    stack: Vec<Slot<B::Value, B::List>>,
    /// Stack indices of the `MARK` slots, innermost last.
    marks: Vec<usize>,
    memo: Memo<B::Value>,
    /// The items of the flat dict being read by [`Machine::flat_dict`], reused.
    scratch: Vec<(B::Value, B::Value)>,
    /// Byte offset and code of the opcode being run; errors name them.
    offset: u64,
    code: u8,
    /// [`Memo::bytes`] already charged to the builder.
    memo_charged: usize,
    /// Stack slots already charged; the stack grows past them only after charging more.
    stack_room: usize,
    /// Capacity of [`Input::long`] already charged.
    long_charged: usize,
}

impl<R: Read, B: Build> Machine<'_, R, B> {
    fn run(mut self) -> Result<B::Value, Fail> {
        loop {
            self.offset = self.input.offset();
            let Some(code) = self.input.byte() else {
                return Err(self.input_failed(Some("an opcode")));
            };
            self.code = code;
            match code {
                0x80 => {
                    let proto = self.byte()?;
                    if proto > 5 {
                        return Err(self.malformed(format!("protocol {proto} is newer than 5")));
                    }
                }
                0x95 => {
                    self.array::<8>()?;
                }
                b'.' => {
                    if self.stack.len() != 1 {
                        return Err(self.malformed(format!(
                            "{} items on the stack, expected 1",
                            self.stack.len()
                        )));
                    }
                    let (value, _) = self.pop_value()?;
                    return Ok(value);
                }
                b'(' => {
                    if !self.flat_batch()? {
                        self.marks.push(self.stack.len());
                        self.push(Slot::Mark)?;
                    }
                }
                b'0' => match self.stack.last() {
                    None => return Err(self.malformed("stack is empty")),
                    Some(Slot::Mark) => {
                        self.stack.pop();
                        self.marks.pop();
                    }
                    Some(_) => {
                        self.pop_value()?;
                    }
                },
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => match self.stack.last() {
                    Some(Slot::Value(v, depth)) => {
                        let slot = Slot::Value(v.clone(), *depth);
                        self.push(slot)?;
                    }
                    _ => return Err(self.malformed("can only duplicate a finished value")),
                },
                b'N' => {
                    let v = self.builder.none();
                    self.push_value(v)?;
                }
                0x88 | 0x89 => {
                    let v = self.builder.bool(code == 0x88);
                    self.push_value(v)?;
                }
                b'J' => {
                    let v = i32::from_le_bytes(self.array()?);
                    let v = self.builder.int(v.into());
                    self.push_value(v)?;
                }
                b'K' => {
                    let v = self.byte()?;
                    let v = self.builder.int(v.into());
                    self.push_value(v)?;
                }
                b'M' => {
                    let v = u16::from_le_bytes(self.array()?);
                    let v = self.builder.int(v.into());
                    self.push_value(v)?;
                }
                0x8a | 0x8b => {
                    let len = if code == 0x8a {
                        u64::from(self.byte()?)
                    } else {
                        let len = i32::from_le_bytes(self.array()?);
                        match u64::try_from(len) {
                            Ok(len) => len,
                            Err(_) => return Err(self.malformed("negative byte count")),
                        }
                    };
                    self.load(len)?;
                    let v = match decode_long(self.input.loaded()) {
                        Ok(v) => self.builder.int(v),
                        Err(wide) => self.builder.big_int(wide),
                    };
                    self.push_value(v)?;
                }
                b'G' => {
                    let v = f64::from_be_bytes(self.array()?);
                    let v = self.builder.float(v);
                    self.push_value(v)?;
                }
                0x8c | b'X' | 0x8d | b'U' | b'T' => {
                    let len = self.read_len(code)?;
                    self.load(len)?;
                    let bytes = self.input.loaded();
                    let v = match std::str::from_utf8(bytes) {
                        Ok(s) => self.builder.str(s),
                        // Python writes lone surrogates with "surrogatepass"; keep going.
                        Err(_) => {
                            let s = String::from_utf8_lossy(bytes).into_owned();
                            self.builder.str(&s)
                        }
                    };
                    self.push_value(v)?;
                }
                b'C' | b'B' | 0x8e | 0x96 => {
                    let len = self.read_len(code)?;
                    self.load(len)?;
                    let v = self.builder.bytes(self.input.loaded());
                    self.push_value(v)?;
                }
                b')' => {
                    let list = self.builder.new_list();
                    let v = self.finish_list(list, true)?;
                    self.push_value(v)?;
                }
                0x85..=0x87 => {
                    let n = usize::from(code - 0x84);
                    if self.items_above_mark() < n {
                        return Err(self.malformed("not enough items on the stack"));
                    }
                    let mut items = Vec::with_capacity(n);
                    let mut depth = 0;
                    for _ in 0..n {
                        let (v, d) = self.pop_value()?;
                        depth = depth.max(d);
                        items.push(v);
                    }
                    items.reverse();
                    let list = self.list_of(items)?;
                    let v = self.finish_list(list, true)?;
                    self.push_nested(v, depth)?;
                }
                b't' | 0x91 => {
                    let (items, depth) = self.pop_mark()?;
                    let list = self.list_of(items)?;
                    let v = self.finish_list(list, code == b't')?;
                    self.push_nested(v, depth)?;
                }
                b']' | 0x8f => {
                    let list = self.builder.new_list();
                    self.push(Slot::List(list, 1, NO_MEMO))?;
                }
                b'}' => {
                    self.close_open_sibling()?;
                    match self.flat_dict(0)? {
                        Some((v, depth)) => self.push(Slot::Value(v, depth))?,
                        None => self.push(Slot::Dict(Vec::new(), 1, NO_MEMO))?,
                    }
                }
                b'l' => {
                    let (items, depth) = self.pop_mark()?;
                    let depth = self.nested_depth(depth)?;
                    let list = self.list_of(items)?;
                    self.push(Slot::List(list, depth, NO_MEMO))?;
                }
                b'd' => {
                    let (items, depth) = self.pop_mark()?;
                    let Some(pairs) = pairs(items) else {
                        return Err(self.malformed("odd number of items"));
                    };
                    self.charge(pairs.len() * size_of::<(B::Value, B::Value)>())?;
                    let depth = self.nested_depth(depth)?;
                    self.push(Slot::Dict(pairs, depth, NO_MEMO))?;
                }
                b'a' | b's' => {
                    let mark = self
                        .stack
                        .len()
                        .checked_sub(if code == b'a' { 1 } else { 2 });
                    match mark {
                        Some(at) if at >= self.marks.last().map_or(0, |m| m + 1) => {
                            self.extend(at, false)?;
                        }
                        _ => return Err(self.malformed("not enough items on the stack")),
                    }
                }
                b'e' | 0x90 | b'u' => {
                    let Some(mark) = self.marks.pop() else {
                        return Err(self.malformed("no MARK on the stack"));
                    };
                    self.extend(mark + 1, true)?;
                }
                0x94 => {
                    let index = self.memo.len();
                    self.memoize(index)?;
                }
                b'q' => {
                    let index = self.byte()?;
                    self.memoize(index.into())?;
                }
                b'r' => {
                    let index = u32::from_le_bytes(self.array()?);
                    self.memoize(index as usize)?;
                }
                b'h' => {
                    let index = self.byte()?;
                    self.memo_get(index.into())?;
                }
                b'j' => {
                    let index = u32::from_le_bytes(self.array()?);
                    self.memo_get(index as usize)?;
                }
                b'c' | 0x93 | b'R' | b'b' | b'i' | b'o' | 0x81 | 0x92 | b'P' | b'Q' | 0x82
                | 0x83 | 0x84 | 0x97 | 0x98 => {
                    return Err(self.refused());
                }
                _ => return Err(self.unsupported()),
            }
        }
    }

    /// Reads a flat dict (`}`, an optional memo put, `MARK`, scalar and memo-reference items,
    /// `SETITEMS`) straight from the buffer, as every trace entry and frame is written, and
    /// returns it finished with its depth. The buffer holds the dict from `lead` bytes on (the
    /// `}` itself is at `lead - 1` or already consumed). `None` (nothing consumed) when the dict
    /// is not flat, is longer than [`FLAT_DICT_WINDOW`], writes to the memo inside, or could
    /// take a second batch of items: the general path then reads it, and reports whatever is
    /// wrong with it.
    #[inline]
    fn flat_dict(&mut self, lead: usize) -> Result<Option<(B::Value, u16)>, Fail> {
        let memo_len = self.memo.len();
        let w = self.input.window(FLAT_DICT_WINDOW);
        let w = w.get(lead..).unwrap_or(&[]);
        let (put, mut i) = match w.first() {
            Some(0x94) => (Some(memo_len), 1),
            Some(b'q') if w.len() > 1 => (Some(usize::from(w[1])), 2),
            Some(b'r') if w.len() > 4 => (Some(u32_at(w, 1) as usize), 5),
            _ => (None, 0),
        };
        if w.get(i) != Some(&b'(') {
            return Ok(None);
        }
        i += 1;
        if put.is_some_and(|index| index >= MAX_MEMO || index > memo_len + MAX_MEMO_GAP) {
            return Ok(None);
        }
        self.scratch.clear();
        let mut depth = 0;
        loop {
            let key = match flat_item(w, &mut i, &self.memo, &mut *self.builder) {
                FlatItem::Value(v, d) => {
                    depth = depth.max(d);
                    v
                }
                FlatItem::End => break,
                FlatItem::Other => return Ok(None),
            };
            // SETITEMS here would leave the key alone: the general path reports it.
            let FlatItem::Value(value, d) = flat_item(w, &mut i, &self.memo, &mut *self.builder)
            else {
                return Ok(None);
            };
            depth = depth.max(d);
            self.scratch.push((key, value));
        }
        // A full batch (pickle writes at most 1000 pairs per SETITEMS, so another may follow) or
        // a MARK after it: the general path decides.
        if self.scratch.len() >= 1000 || w.get(i + 1) == Some(&b'(') {
            return Ok(None);
        }
        let depth = depth + 1;
        if depth > MAX_DEPTH {
            return Ok(None);
        }
        self.input.pos += lead + i + 1;
        let value = match self.builder.dict(&mut self.scratch) {
            Ok(v) => v,
            Err(reason) => return Err(self.limit(reason)),
        };
        self.scratch.clear();
        if let Some(index) = put {
            self.memo_set(
                index,
                MemoEntry {
                    value: value.clone(),
                    aux: depth.into(),
                    state: MemoState::Ready,
                },
            );
            self.charge_memo()?;
        }
        Ok(Some((value, depth)))
    }

    /// Closes the dict on top of the stack when a dict follows it: a dict about to receive a
    /// value would have its key on top, so this one is a finished sibling. The builder then
    /// gets dicts in the order they were written even when the flat ones after it are read at
    /// once (records are numbered in that order). Only a pickle that pops the later dict to
    /// add to this one again could tell, and no pickler writes one.
    #[inline]
    fn close_open_sibling(&mut self) -> Result<(), Fail> {
        if self.items_above_mark() > 0
            && let Some(top) = self.stack.last_mut()
            && matches!(top, Slot::Dict(..))
            && let Err(why) = close_in_place(self.builder, &mut self.memo, top)
        {
            return Err(self.close_failed(why));
        }
        Ok(())
    }

    /// At a `MARK` right above an open list: appends the flat dicts that follow straight to
    /// the list, as `APPENDS` would (a trace is batches of 1000 of them), without the stack.
    /// At the first item that is not a flat dict the mark is pushed and the general path goes
    /// on from there; `false` (nothing done) when this is no such batch.
    #[inline]
    fn flat_batch(&mut self) -> Result<bool, Fail> {
        if self.items_above_mark() == 0
            || !matches!(self.stack.last(), Some(Slot::List(..)))
            || self.input.window(1).first() != Some(&b'}')
        {
            return Ok(false);
        }
        let Some(Slot::List(mut list, mut depth, id)) = self.stack.pop() else {
            unreachable!("checked above")
        };
        let mark_offset = self.offset;
        let done = loop {
            match self.input.window(1).first().copied() {
                Some(b'}') => {
                    self.offset = self.input.offset();
                    self.code = b'}';
                    match self.flat_dict(1) {
                        Ok(Some((v, d))) => {
                            depth = depth.max(d + 1);
                            if let Err(reason) = self.builder.push(&mut list, v) {
                                break Err(self.limit(reason));
                            }
                        }
                        Ok(None) => break Ok(false),
                        Err(e) => break Err(e),
                    }
                }
                Some(b'e') => {
                    self.input.pos += 1;
                    break Ok(true);
                }
                Some(0x95) if self.input.window(9).len() >= 9 => self.input.pos += 9,
                _ => break Ok(false),
            }
        };
        self.stack.push(Slot::List(list, depth, id));
        if depth > MAX_DEPTH {
            return Err(self.too_deep());
        }
        if !done? {
            // The rest of the batch takes the general path, after the mark it started with.
            self.offset = mark_offset;
            self.code = b'(';
            self.marks.push(self.stack.len());
            self.push(Slot::Mark)?;
        }
        Ok(true)
    }

    /// The name of the opcode being run (computed only for errors).
    fn name(&self) -> &'static str {
        opcode_name(self.code).unwrap_or("an opcode")
    }

    #[cold]
    #[inline(never)]
    fn malformed(&self, reason: impl Into<String>) -> Fail {
        Box::new(PickleError::Malformed {
            opcode: self.name(),
            offset: self.offset,
            reason: reason.into(),
        })
    }

    #[cold]
    #[inline(never)]
    fn limit(&self, reason: String) -> Fail {
        Box::new(PickleError::Limit {
            opcode: self.name(),
            offset: self.offset,
            reason,
        })
    }

    #[cold]
    #[inline(never)]
    fn too_deep(&self) -> Fail {
        self.limit(format!("containers nested deeper than {MAX_DEPTH}"))
    }

    #[cold]
    #[inline(never)]
    fn refused(&self) -> Fail {
        Box::new(PickleError::Refused {
            name: self.name(),
            offset: self.offset,
        })
    }

    #[cold]
    #[inline(never)]
    fn unsupported(&self) -> Fail {
        let offset = self.offset;
        Box::new(match opcode_name(self.code) {
            Some(name) => PickleError::Unsupported { name, offset },
            None => PickleError::UnknownOpcode {
                code: self.code,
                offset,
            },
        })
    }

    /// The error for a failed read: the kept I/O error, else a truncation inside `opcode` (the
    /// opcode being run when `None`).
    #[cold]
    #[inline(never)]
    fn input_failed(&mut self, opcode: Option<&'static str>) -> Fail {
        Box::new(match self.input.error.take() {
            Some((offset, source)) => PickleError::Io { offset, source },
            None => PickleError::Truncated {
                opcode: opcode.unwrap_or_else(|| self.name()),
                offset: self.input.base + self.input.end as u64,
            },
        })
    }

    #[inline(always)]
    fn byte(&mut self) -> Result<u8, Fail> {
        match self.input.byte() {
            Some(b) => Ok(b),
            None => Err(self.input_failed(None)),
        }
    }

    #[inline(always)]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], Fail> {
        match self.input.array() {
            Some(a) => Ok(a),
            None => Err(self.input_failed(None)),
        }
    }

    /// Reads `n` bytes for [`Input::loaded`].
    #[inline(always)]
    fn load(&mut self, n: u64) -> Result<(), Fail> {
        let loaded = self.input.load(n);
        if self.input.long.capacity() > self.long_charged {
            let capacity = self.input.long.capacity();
            self.charge(capacity - self.long_charged)?;
            self.long_charged = capacity;
        }
        if loaded {
            Ok(())
        } else if self.input.too_long {
            Err(self.limit(format!(
                "a string, bytes or int of {n} bytes, more than the {MAX_BYTES} read"
            )))
        } else {
            Err(self.input_failed(None))
        }
    }

    fn read_len(&mut self, code: u8) -> Result<u64, Fail> {
        Ok(match code {
            0x8c | b'U' | b'C' => self.byte()?.into(),
            b'X' | b'B' => u32::from_le_bytes(self.array()?).into(),
            b'T' => {
                let len = i32::from_le_bytes(self.array()?);
                match u64::try_from(len) {
                    Ok(len) => len,
                    Err(_) => return Err(self.malformed("negative length")),
                }
            }
            _ => u64::from_le_bytes(self.array()?),
        })
    }

    #[inline(always)]
    fn push(&mut self, slot: Slot<B::Value, B::List>) -> Result<(), Fail> {
        if self.stack.len() >= self.stack_room || self.builder.over_budget() {
            self.grow_stack_room()?;
        }
        self.stack.push(slot);
        Ok(())
    }

    /// Charges room for twice the stack (a slot and a mark's index each), up to [`MAX_STACK`].
    #[cold]
    #[inline(never)]
    fn grow_stack_room(&mut self) -> Result<(), Fail> {
        if self.builder.over_budget() {
            // The builder's charge fails again and names the budget.
            return self.charge(0);
        }
        if self.stack.len() < self.stack_room {
            return Ok(());
        }
        if self.stack_room >= MAX_STACK {
            return Err(self.limit(format!("more than {MAX_STACK} items on the stack")));
        }
        let room = (self.stack_room * 2).clamp(1024, MAX_STACK);
        let slot = size_of::<Slot<B::Value, B::List>>() + size_of::<usize>();
        self.charge((room - self.stack_room) * slot)?;
        self.stack_room = room;
        Ok(())
    }

    #[inline(always)]
    fn push_value(&mut self, v: B::Value) -> Result<(), Fail> {
        self.push(Slot::Value(v, 0))
    }

    fn nested_depth(&self, child_depth: u16) -> Result<u16, Fail> {
        let depth = child_depth + 1;
        if depth > MAX_DEPTH {
            return Err(self.too_deep());
        }
        Ok(depth)
    }

    fn push_nested(&mut self, v: B::Value, child_depth: u16) -> Result<(), Fail> {
        let depth = self.nested_depth(child_depth)?;
        self.push(Slot::Value(v, depth))
    }

    /// A builder list holding `items`.
    fn list_of(&mut self, items: Vec<B::Value>) -> Result<B::List, Fail> {
        let mut list = self.builder.new_list();
        for item in items {
            if let Err(reason) = self.builder.push(&mut list, item) {
                return Err(self.limit(reason));
            }
        }
        Ok(list)
    }

    fn finish_list(&mut self, list: B::List, tuple: bool) -> Result<B::Value, Fail> {
        self.builder
            .list(list, tuple)
            .map_err(|reason| self.limit(reason))
    }

    #[inline(always)]
    fn items_above_mark(&self) -> usize {
        self.stack.len() - self.marks.last().map_or(0, |m| m + 1)
    }

    /// Closes a slot: an open container goes to the builder and its memo slot becomes ready.
    #[inline(always)]
    fn close(&mut self, slot: Slot<B::Value, B::List>) -> Result<(B::Value, u16), Fail> {
        match slot {
            Slot::Value(v, depth) => Ok((v, depth)),
            slot => match close_container(self.builder, &mut self.memo, slot) {
                Ok(done) => Ok(done),
                Err(why) => Err(self.close_failed(why)),
            },
        }
    }

    #[cold]
    #[inline(never)]
    fn close_failed(&self, why: CloseError) -> Fail {
        match why {
            CloseError::Mark => self.found_mark(),
            CloseError::Build(reason) => self.limit(reason),
        }
    }

    #[cold]
    #[inline(never)]
    fn found_mark(&self) -> Fail {
        self.malformed("found MARK where a value was expected")
    }

    fn pop_value(&mut self) -> Result<(B::Value, u16), Fail> {
        if self.items_above_mark() == 0 {
            return Err(self.malformed("no value on the stack"));
        }
        let slot = self.stack.pop().expect("items_above_mark counted it");
        self.close(slot)
    }

    /// Pops everything above the innermost mark, and the mark; returns the items, oldest first,
    /// and their deepest depth.
    fn pop_mark(&mut self) -> Result<(Vec<B::Value>, u16), Fail> {
        let Some(mark) = self.marks.pop() else {
            return Err(self.malformed("no MARK on the stack"));
        };
        let mut items = Vec::with_capacity(self.stack.len() - mark - 1);
        let mut depth = 0;
        let mut failed = None;
        for slot in self.stack.drain(mark + 1..) {
            let (v, d) = match slot {
                Slot::Value(v, d) => (v, d),
                slot => match close_container(self.builder, &mut self.memo, slot) {
                    Ok(done) => done,
                    Err(why) => {
                        failed = Some(why);
                        break;
                    }
                },
            };
            depth = depth.max(d);
            items.push(v);
        }
        if let Some(why) = failed {
            return Err(self.close_failed(why));
        }
        self.stack.pop();
        Ok((items, depth))
    }

    /// Moves the slots from `from` up into the open list or dict just below `from` (below the
    /// mark when `marked`, which is then popped too).
    fn extend(&mut self, from: usize, marked: bool) -> Result<(), Fail> {
        let target_at = if marked {
            from.checked_sub(2)
        } else {
            from.checked_sub(1)
        };
        // The target must not be a mark, and not sit below another mark.
        let floor = self.marks.last().map_or(0, |m| m + 1);
        let target_at = match target_at {
            Some(t) if t >= floor && !matches!(self.stack[t], Slot::Mark) => t,
            _ => return Err(self.malformed("no list, set or dict below the items")),
        };
        let mut target = std::mem::replace(&mut self.stack[target_at], Slot::Mark);
        let result = self.fill(&mut target, from);
        self.stack.truncate(target_at + 1);
        self.stack[target_at] = target;
        match result {
            Ok(()) => Ok(()),
            Err(why) => Err(self.fill_failed(why)),
        }
    }

    /// Moves `stack[from..]` into `target`; `Err` says why not (see [`Machine::fill_failed`]).
    #[inline(always)]
    fn fill(&mut self, target: &mut Slot<B::Value, B::List>, from: usize) -> Result<(), FillError> {
        let is_dict = matches!(target, Slot::Dict(..));
        let (Slot::List(_, depth, _) | Slot::Dict(_, depth, _)) = target else {
            return Err(FillError::NotAContainer);
        };
        if is_dict && !(self.stack.len() - from).is_multiple_of(2) {
            return Err(FillError::Odd);
        }
        // First close every item in place, in order, checking depths; then move them over.
        // (Two passes keep the common case, a finished value, a plain move.)
        let mut deepest = 0;
        for slot in &mut self.stack[from..] {
            if !matches!(slot, Slot::Value(..)) {
                close_in_place(self.builder, &mut self.memo, slot)?;
            }
            let Slot::Value(_, d) = slot else {
                unreachable!("closed above")
            };
            if *d >= MAX_DEPTH {
                return Err(FillError::TooDeep);
            }
            deepest = deepest.max(*d + 1);
        }
        *depth = (*depth).max(deepest);
        let mut slots = self.stack.drain(from..);
        match target {
            Slot::List(list, _, _) => {
                for slot in slots {
                    if let Slot::Value(v, _) = slot {
                        self.builder.push(list, v).map_err(FillError::Build)?;
                    }
                }
            }
            Slot::Dict(dict, _, _) => {
                let pairs = slots.len() / 2;
                self.builder
                    .charge(pairs * size_of::<(B::Value, B::Value)>())
                    .map_err(FillError::Build)?;
                dict.reserve(pairs);
                while let (Some(Slot::Value(k, _)), Some(Slot::Value(v, _))) =
                    (slots.next(), slots.next())
                {
                    dict.push((k, v));
                }
            }
            _ => unreachable!("checked above"),
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn fill_failed(&self, why: FillError) -> Fail {
        match why {
            FillError::Mark => self.found_mark(),
            FillError::TooDeep => self.too_deep(),
            FillError::Odd => self.malformed("odd number of items"),
            FillError::NotAContainer => self.malformed(
                "target is not a list, set or dict being built (or is already referenced, as in a self-referencing structure)",
            ),
            FillError::Build(reason) => self.limit(reason),
        }
    }

    /// The top slot, unless it is a mark (a mark's slot is never a target).
    fn open_top(&mut self) -> Option<&mut Slot<B::Value, B::List>> {
        if self.items_above_mark() == 0 {
            return None;
        }
        self.stack.last_mut()
    }

    /// Stores `entry` at memo `index` (checked by the caller), growing the memo as needed.
    #[inline]
    fn memo_set(&mut self, index: usize, entry: MemoEntry<B::Value>) {
        self.memo.set(index, entry, &*self.builder);
    }

    #[inline]
    fn memoize(&mut self, index: usize) -> Result<(), Fail> {
        if index >= MAX_MEMO || index > self.memo.len() + MAX_MEMO_GAP {
            return Err(self.limit(format!(
                "memo index {index} is too large ({} entries so far)",
                self.memo.len()
            )));
        }
        let at = self.stack.len().saturating_sub(1);
        let placeholder = self.placeholder.clone();
        let entry = match self.open_top() {
            None => return Err(self.malformed("nothing to memoize")),
            Some(Slot::Value(v, depth)) => MemoEntry {
                value: v.clone(),
                aux: (*depth).into(),
                state: MemoState::Ready,
            },
            Some(Slot::List(_, _, id) | Slot::Dict(_, _, id)) => {
                if *id == NO_MEMO || *id as usize == index {
                    *id = index as u32;
                    MemoEntry {
                        value: placeholder,
                        aux: at as u32,
                        state: MemoState::Open,
                    }
                } else {
                    MemoEntry {
                        value: placeholder,
                        aux: *id,
                        state: MemoState::Alias,
                    }
                }
            }
            Some(Slot::Mark) => unreachable!("open_top never returns a mark"),
        };
        self.memo_set(index, entry);
        self.charge_memo()
    }

    /// Charges the memo chunks allocated since the last call: one test per memo put.
    #[inline(always)]
    fn charge_memo(&mut self) -> Result<(), Fail> {
        if self.memo.bytes > self.memo_charged {
            return self.charge_memo_chunks();
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn charge_memo_chunks(&mut self) -> Result<(), Fail> {
        let more = self.memo.bytes - self.memo_charged;
        self.memo_charged = self.memo.bytes;
        self.charge(more)
    }

    /// Charges `bytes` to the builder; its refusal names the opcode being run.
    #[cold]
    #[inline(never)]
    fn charge(&mut self, bytes: usize) -> Result<(), Fail> {
        self.builder
            .charge(bytes)
            .map_err(|reason| self.limit(reason))
    }

    #[inline]
    fn memo_get(&mut self, index: usize) -> Result<(), Fail> {
        if let Some(m) = self.memo.get(index, &*self.builder)
            && m.state == MemoState::Ready
        {
            return self.push(Slot::Value(m.value, m.aux as u16));
        }
        self.memo_get_slow(index)
    }

    /// [`Machine::memo_get`] of an alias, of a container still open, or of nothing.
    #[inline(never)]
    fn memo_get_slow(&mut self, index: usize) -> Result<(), Fail> {
        let index = match self.memo.get(index, &*self.builder) {
            Some(m) if m.state == MemoState::Alias => m.aux as usize,
            _ => index,
        };
        if let Some(m) = self.memo.get(index, &*self.builder)
            && m.state == MemoState::Open
        {
            let at = m.aux as usize;
            if matches!(self.stack.get(at), Some(Slot::List(..) | Slot::Dict(..))) {
                // Close the container where it stands; it can no longer receive items.
                let open = std::mem::replace(&mut self.stack[at], Slot::Mark);
                let (v, depth) = self.close(open)?;
                self.stack[at] = Slot::Value(v, depth);
            }
        }
        let slot = match self.memo.get(index, &*self.builder) {
            Some(m) if m.state == MemoState::Ready => Slot::Value(m.value, m.aux as u16),
            // Only reachable when one memo index was stored over and over for different
            // containers; no pickler does that.
            Some(m) if m.state != MemoState::Empty => {
                return Err(self.malformed(format!(
                    "memo index {index} was overwritten while its container was being built"
                )));
            }
            _ => {
                return Err(self.malformed(format!(
                    "memo index {index} was never stored ({} entries)",
                    self.memo.len()
                )));
            }
        };
        self.push(slot)
    }
}

/// The little-endian `u32` at `at` (the caller checked the length).
#[inline(always)]
fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// What [`flat_item`] read.
enum FlatItem<V> {
    /// A key or value, with its depth.
    Value(V, u16),
    /// `SETITEMS`.
    End,
    /// An opcode that leaves the whole dict to the general path.
    Other,
}

/// Reads the scalar or memo reference at `w[*at..]` for [`Machine::flat_dict`], skipping any
/// `FRAME` before it, and moves `*at` past it (at `SETITEMS`, onto it). The dict reads its
/// key and then its value with it, instead of one loop alternating between the two; a free
/// function, so that it can borrow the memo and builder while `w` borrows the input.
#[inline(always)]
fn flat_item<B: Build>(
    w: &[u8],
    at: &mut usize,
    memo: &Memo<B::Value>,
    builder: &mut B,
) -> FlatItem<B::Value> {
    loop {
        let i = *at;
        let Some(&op) = w.get(i) else {
            return FlatItem::Other;
        };
        let (value, len) = match op {
            b'u' => return FlatItem::End,
            // A frame boundary may fall between any two opcodes; its length is only a hint.
            0x95 if w.len() > i + 8 => {
                *at += 9;
                continue;
            }
            b'h' | b'j' => {
                let (index, len) = if op == b'h' {
                    match w.get(i + 1) {
                        Some(&b) => (usize::from(b), 2),
                        None => return FlatItem::Other,
                    }
                } else if w.len() > i + 4 {
                    (u32_at(w, i + 1) as usize, 5)
                } else {
                    return FlatItem::Other;
                };
                match memo.ready(index, &*builder) {
                    Some((value, d)) => {
                        *at += len;
                        return FlatItem::Value(value, d);
                    }
                    None => return FlatItem::Other,
                }
            }
            b'K' => match w.get(i + 1) {
                Some(&b) => (builder.int(b.into()), 2),
                None => return FlatItem::Other,
            },
            b'M' if w.len() > i + 2 => {
                let v = u16::from_le_bytes([w[i + 1], w[i + 2]]);
                (builder.int(v.into()), 3)
            }
            b'J' if w.len() > i + 4 => (builder.int(i64::from(u32_at(w, i + 1) as i32)), 5),
            0x8a => {
                let Some(&n) = w.get(i + 1) else {
                    return FlatItem::Other;
                };
                let n = usize::from(n);
                // Eight bytes at once when the window has them (all but its last few).
                let v = match (n, w.get(i + 2..i + 10)) {
                    (1..=8, Some(eight)) => short_long(eight.try_into().expect("8 bytes"), n),
                    (0..=8, _) => match w.get(i + 2..i + 2 + n).map(decode_long) {
                        Some(Ok(v)) => v,
                        _ => return FlatItem::Other,
                    },
                    _ => return FlatItem::Other,
                };
                (builder.int(v), 2 + n)
            }
            b'N' => (builder.none(), 1),
            0x88 | 0x89 => (builder.bool(op == 0x88), 1),
            b'G' => match w.get(i + 1..i + 9) {
                Some(b) => (
                    builder.float(f64::from_be_bytes(b.try_into().expect("8 bytes"))),
                    9,
                ),
                None => return FlatItem::Other,
            },
            0x8c => {
                let Some(&n) = w.get(i + 1) else {
                    return FlatItem::Other;
                };
                let end = i + 2 + usize::from(n);
                // A string memoized here changes the memo: the general path does that.
                match (w.get(i + 2..end), w.get(end)) {
                    (Some(bytes), Some(next)) if !matches!(next, 0x94 | b'q' | b'r') => {
                        match std::str::from_utf8(bytes) {
                            Ok(s) => (builder.str(s), end - i),
                            Err(_) => return FlatItem::Other,
                        }
                    }
                    _ => return FlatItem::Other,
                }
            }
            _ => return FlatItem::Other,
        };
        *at += len;
        return FlatItem::Value(value, 0);
    }
}

/// Why [`Machine::fill`] stopped.
enum FillError {
    Mark,
    TooDeep,
    Odd,
    NotAContainer,
    Build(String),
}

/// Why [`close_container`] could not close a slot.
enum CloseError {
    Mark,
    Build(String),
}

impl From<CloseError> for FillError {
    fn from(why: CloseError) -> Self {
        match why {
            CloseError::Mark => FillError::Mark,
            CloseError::Build(reason) => FillError::Build(reason),
        }
    }
}

/// [`close_container`] where the slot stands: it becomes a [`Slot::Value`].
#[inline(never)]
fn close_in_place<B: Build>(
    builder: &mut B,
    memo: &mut Memo<B::Value>,
    slot: &mut Slot<B::Value, B::List>,
) -> Result<(), CloseError> {
    let open = std::mem::replace(slot, Slot::Mark);
    let (v, depth) = close_container(builder, memo, open)?;
    *slot = Slot::Value(v, depth);
    Ok(())
}

/// Hands an open container to the builder and makes its memo slot ready.
/// A free function so it can run while the stack is being drained.
#[inline]
fn close_container<B: Build>(
    builder: &mut B,
    memo: &mut Memo<B::Value>,
    slot: Slot<B::Value, B::List>,
) -> Result<(B::Value, u16), CloseError> {
    let (value, depth, id) = match slot {
        Slot::Value(v, depth) => return Ok((v, depth)),
        Slot::Mark => return Err(CloseError::Mark),
        Slot::List(list, depth, id) => (builder.list(list, false), depth, id),
        Slot::Dict(mut items, depth, id) => (builder.dict(&mut items), depth, id),
    };
    let value = value.map_err(CloseError::Build)?;
    if id != NO_MEMO {
        let entry = MemoEntry {
            value: value.clone(),
            aux: depth.into(),
            state: MemoState::Ready,
        };
        memo.set(id as usize, entry, builder);
    }
    Ok((value, depth))
}

fn pairs<V>(items: Vec<V>) -> Option<Vec<(V, V)>> {
    if !items.len().is_multiple_of(2) {
        return None;
    }
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Result<Value, PickleError> {
        read(bytes, &mut ValueBuilder)
    }

    fn s(text: &str) -> Value {
        Value::Str(text.into())
    }

    #[test]
    fn reads_a_protocol_2_dict_with_memo_references() {
        // pickle.dumps({'a': [1, 'x'], 'b': 'x'}, 2) with the 'x' memoized and reused.
        let bytes = b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01]q\x02(K\x01X\x01\x00\x00\x00xq\x03eX\x01\x00\x00\x00bq\x04h\x03u.";
        let v = parse(bytes).unwrap();
        let expected = Value::Dict(
            vec![
                (s("a"), Value::List(vec![Value::Int(1), s("x")].into())),
                (s("b"), s("x")),
            ]
            .into(),
        );
        assert_eq!(v, expected);
    }

    #[test]
    fn reads_protocol_5_frames_and_memoize() {
        // pickle.dumps(('é', b'\x00', None, True, 1.5), 5)
        let bytes = b"\x80\x05\x95\x18\x00\x00\x00\x00\x00\x00\x00(\x8c\x02\xc3\xa9\x94C\x01\x00\x94N\x88G?\xf8\x00\x00\x00\x00\x00\x00t\x94.";
        let v = parse(bytes).unwrap();
        let expected = Value::Tuple(
            vec![
                s("é"),
                Value::Bytes(vec![0u8].into()),
                Value::None,
                Value::Bool(true),
                Value::Float(1.5),
            ]
            .into(),
        );
        assert_eq!(v, expected);
    }

    #[test]
    fn long1_wider_than_8_bytes_is_kept_whole() {
        // pickle.dumps(2**64, 2) = LONG1 with 9 bytes.
        let v = parse(b"\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.").unwrap();
        assert_eq!(v, Value::BigInt(vec![0, 0, 0, 0, 0, 0, 0, 0, 1].into()));
        // -1 written with redundant sign bytes still fits an i64.
        let v = parse(b"\x80\x02\x8a\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff.").unwrap();
        assert_eq!(v, Value::Int(-1));
        // 2**63 - 1 and -2**63 fit; LONG1 of length 0 is 0.
        assert_eq!(
            decode_long(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00]),
            Ok(i64::MAX)
        );
        assert_eq!(decode_long(&[0, 0, 0, 0, 0, 0, 0, 0x80]), Ok(i64::MIN));
        assert_eq!(decode_long(&[]), Ok(0));
    }

    #[test]
    fn long4_with_negative_length_is_malformed() {
        let e = parse(b"\x80\x02\x8b\xff\xff\xff\xff.").unwrap_err();
        assert_eq!(
            e.to_string(),
            "malformed pickle: LONG4 at byte 2: negative byte count"
        );
    }

    #[test]
    fn global_is_refused_with_its_offset() {
        let e = parse(b"\x80\x02cos\nsystem\nq\x00.").unwrap_err();
        assert_eq!(
            e.to_string(),
            "refused pickle opcode GLOBAL at byte 2: it would import or run Python code, which memprints never does"
        );
    }

    #[test]
    fn reduce_is_refused_even_without_a_global() {
        let e = parse(b"\x80\x02))R.").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("refused pickle opcode REDUCE at byte 4"),
            "{e}"
        );
    }

    #[test]
    fn text_protocol_opcodes_are_unsupported() {
        let e = parse(b"I42\n.").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("unsupported pickle opcode INT at byte 0"),
            "{e}"
        );
    }

    #[test]
    fn unknown_opcode_is_named_by_hex() {
        let e = parse(b"\x80\x04\xff").unwrap_err();
        assert_eq!(e.to_string(), "unknown pickle opcode 0xff at byte 2");
    }

    #[test]
    fn truncated_pickle_names_where_input_ends() {
        let e = parse(b"\x80\x02X\x05\x00\x00\x00ab").unwrap_err();
        assert_eq!(
            e.to_string(),
            "pickle is truncated: input ends at byte 9 inside BINUNICODE"
        );
        let e = parse(b"\x80\x02]q\x00(K\x01").unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        assert!(parse(b"").unwrap_err().to_string().contains("truncated"));
    }

    #[test]
    fn huge_declared_length_fails_as_truncation_without_allocating() {
        let e = parse(b"\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x40abc").unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        let e = parse(b"\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\xffabc").unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
    }

    #[test]
    fn strings_longer_than_the_buffer_are_read_whole() {
        let n = BUFFER_BYTES * 2 + 7;
        let mut bytes = b"\x80\x04\x8d".to_vec();
        bytes.extend_from_slice(&(n as u64).to_le_bytes());
        bytes.extend(std::iter::repeat_n(b'z', n));
        bytes.push(b'.');
        let Value::Str(text) = parse(&bytes).unwrap() else {
            panic!("expected a string")
        };
        assert_eq!(text.len(), n);
    }

    #[test]
    fn a_string_past_the_limit_is_refused_not_read_whole() {
        let n = MAX_BYTES + 10;
        let mut bytes = b"\x80\x04\x8d".to_vec();
        bytes.extend_from_slice(&(n as u64).to_le_bytes());
        bytes.extend(std::iter::repeat_n(b'z', n));
        bytes.push(b'.');
        let e = parse(&bytes).unwrap_err().to_string();
        assert!(
            e.starts_with("pickle exceeds a limit: BINUNICODE8 at byte 2: a string, bytes or int of 16777226 bytes"),
            "{e}"
        );
    }

    #[test]
    fn deep_nesting_is_refused() {
        let mut bytes = b"\x80\x04N".to_vec();
        bytes.extend(std::iter::repeat_n(0x85u8, 10_000));
        bytes.push(b'.');
        let e = parse(&bytes).unwrap_err();
        assert!(e.to_string().contains("nested deeper than 256"), "{e}");

        let mut bytes = b"\x80\x04".to_vec();
        bytes.extend(std::iter::repeat_n(b']', 10_000));
        bytes.extend(std::iter::repeat_n(b'a', 9_999));
        bytes.push(b'.');
        let e = parse(&bytes).unwrap_err();
        assert!(e.to_string().contains("nested deeper than 256"), "{e}");
    }

    #[test]
    fn memo_index_out_of_range_is_malformed() {
        let e = parse(b"\x80\x02h\x07.").unwrap_err();
        assert_eq!(
            e.to_string(),
            "malformed pickle: BINGET at byte 2: memo index 7 was never stored (0 entries)"
        );
        let e = parse(b"\x80\x02Nr\xff\xff\xff\xff.").unwrap_err();
        assert!(
            e.to_string().contains("memo index 4294967295 is too large"),
            "{e}"
        );
    }

    #[test]
    fn self_referencing_list_is_refused() {
        // l = []; l.append(l); pickle.dumps(l, 2)
        let e = parse(b"\x80\x02]q\x00h\x00a.").unwrap_err();
        assert!(e.to_string().contains("self-referencing"), "{e}");
        // d = {}; d['k'] = d
        let e = parse(b"\x80\x02}q\x00X\x01\x00\x00\x00kh\x00s.").unwrap_err();
        assert!(e.to_string().contains("self-referencing"), "{e}");
    }

    #[test]
    fn a_container_referenced_before_its_parent_is_complete_reads() {
        // e = []; pickle.dumps({'a': e, 'b': [e]}, 2): 'e' is referenced while the dict's
        // items are still on the stack.
        let bytes =
            b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01]q\x02X\x01\x00\x00\x00bq\x03]q\x04h\x02au.";
        let empty = Value::List(Vec::new().into());
        let expected = Value::Dict(
            vec![
                (s("a"), empty.clone()),
                (s("b"), Value::List(vec![empty].into())),
            ]
            .into(),
        );
        assert_eq!(parse(bytes).unwrap(), expected);
    }

    #[test]
    fn stop_needs_exactly_one_value() {
        let e = parse(b"\x80\x02NN.").unwrap_err();
        assert!(e.to_string().contains("2 items on the stack"), "{e}");
        let e = parse(b"\x80\x02.").unwrap_err();
        assert!(e.to_string().contains("0 items on the stack"), "{e}");
    }

    #[test]
    fn setitems_with_odd_items_and_appends_without_list_are_malformed() {
        let e = parse(b"\x80\x02}(Nu.").unwrap_err();
        assert!(e.to_string().contains("odd number of items"), "{e}");
        let e = parse(b"\x80\x02N(Ne.").unwrap_err();
        assert!(e.to_string().contains("not a list"), "{e}");
        let e = parse(b"\x80\x02e.").unwrap_err();
        assert!(e.to_string().contains("no MARK"), "{e}");
    }

    #[test]
    fn memo_index_reused_for_nested_containers_fails_cleanly() {
        // Found by the fuzzer: one memo index stored on nested lists and a value, then read.
        let crash = b"\x80\x02]qq]qqqqqqqqqqqqqq\x02]qq]qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqQhqqqQht";
        assert!(parse(crash).is_err());
    }

    #[test]
    fn sets_read_as_lists() {
        // pickle.dumps({1}, 4) without the frame.
        let v = parse(b"\x80\x04\x8f\x94(K\x01\x90.").unwrap();
        assert_eq!(v, Value::List(vec![Value::Int(1)].into()));
    }

    #[test]
    fn nothing_after_stop_is_read() {
        assert_eq!(parse(b"\x80\x02N.garbage").unwrap(), Value::None);
    }

    /// `short_long` reads what `decode_long` reads, for every width it takes.
    #[test]
    fn short_long_agrees_with_decode_long() {
        let patterns: [[u8; 8]; 6] = [
            [0; 8],
            [0xff; 8],
            [0x7f, 0xff, 0x80, 0x00, 0x01, 0xfe, 0x80, 0x7f],
            [0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80],
            [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08],
            [0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9, 0xf8, 0xf7],
        ];
        for eight in patterns {
            for n in 1..=8 {
                assert_eq!(
                    Ok(short_long(eight, n)),
                    decode_long(&eight[..n]),
                    "{eight:?} {n}"
                );
            }
        }
    }

    mod flat {
        use super::*;
        use proptest::prelude::*;

        /// A scalar or memo reference, as a flat dict holds them.
        #[derive(Debug, Clone)]
        enum Item {
            Int1(u8),
            Int2(u16),
            Int4(i32),
            Long(Vec<u8>),
            None,
            Bool(bool),
            Float(f64),
            Str(String),
            /// A reference to one of the three strings memoized first.
            Memo(u8),
        }

        fn item() -> impl Strategy<Value = Item> {
            prop_oneof![
                any::<u8>().prop_map(Item::Int1),
                any::<u16>().prop_map(Item::Int2),
                any::<i32>().prop_map(Item::Int4),
                // Up to 10 bytes: the widest do not fit an i64.
                proptest::collection::vec(any::<u8>(), 0..=10).prop_map(Item::Long),
                Just(Item::None),
                any::<bool>().prop_map(Item::Bool),
                (-1e300f64..1e300).prop_map(Item::Float),
                "[a-zé]{0,6}".prop_map(Item::Str),
                (0u8..3).prop_map(Item::Memo),
            ]
        }

        /// Writes `item`, after a `FRAME` when `frame`.
        fn write(out: &mut Vec<u8>, item: &Item, frame: bool) {
            if frame {
                out.push(0x95);
                out.extend_from_slice(&7u64.to_le_bytes());
            }
            match item {
                Item::Int1(v) => out.extend_from_slice(&[b'K', *v]),
                Item::Int2(v) => {
                    out.push(b'M');
                    out.extend_from_slice(&v.to_le_bytes());
                }
                Item::Int4(v) => {
                    out.push(b'J');
                    out.extend_from_slice(&v.to_le_bytes());
                }
                Item::Long(bytes) => {
                    out.extend_from_slice(&[0x8a, bytes.len() as u8]);
                    out.extend_from_slice(bytes);
                }
                Item::None => out.push(b'N'),
                Item::Bool(b) => out.push(if *b { 0x88 } else { 0x89 }),
                Item::Float(f) => {
                    out.push(b'G');
                    out.extend_from_slice(&f.to_be_bytes());
                }
                Item::Str(text) => {
                    out.extend_from_slice(&[0x8c, text.len() as u8]);
                    out.extend_from_slice(text.as_bytes());
                }
                Item::Memo(i) => out.extend_from_slice(&[b'h', *i]),
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

            /// A list of dicts written as `pickle.dump` writes them (`}`, MEMOIZE, MARK, items,
            /// SETITEMS: the flat-dict path, in a batch the flat-batch path appends) reads as
            /// the same dicts written with MARK, items, DICT (the general path), then a memo
            /// reference to one of them. The last dict ends a few bytes before the input, so
            /// the 8-byte reads near the window's end take their fallback.
            #[test]
            fn flat_dicts_read_as_the_general_path_reads_them(
                dicts in proptest::collection::vec(
                    proptest::collection::vec(((item(), any::<bool>()), (item(), any::<bool>())), 0..8),
                    1..5,
                ),
                pick in any::<proptest::sample::Index>(),
            ) {
                let mut head = b"\x80\x04".to_vec();
                for text in ["a", "bb", "\u{e9}"] {
                    head.extend_from_slice(&[0x8c, text.len() as u8]);
                    head.extend_from_slice(text.as_bytes());
                    head.extend_from_slice(b"\x940");
                }
                let (mut fast, mut general) = (head.clone(), head);
                fast.extend_from_slice(b"](");
                general.extend_from_slice(b"](");
                for pairs in &dicts {
                    fast.extend_from_slice(b"}\x94(");
                    general.push(b'(');
                    for ((k, kf), (v, vf)) in pairs {
                        for out in [&mut fast, &mut general] {
                            write(out, k, *kf);
                            write(out, v, *vf);
                        }
                    }
                    fast.push(b'u');
                    general.extend_from_slice(b"d\x94");
                }
                let back = 3 + pick.index(dicts.len()) as u8;
                for out in [&mut fast, &mut general] {
                    out.extend_from_slice(&[b'e', b'h', back, 0x86, b'.']);
                }
                let read_fast = parse(&fast).map_err(|e| e.to_string());
                let read_general = parse(&general).map_err(|e| e.to_string());
                prop_assert!(read_general.is_ok(), "{read_general:?}");
                prop_assert_eq!(read_fast, read_general);
            }
        }
    }
}
