//! The raw figures of the moves, in plain numbers a forked child fills in
//! without allocating and sends back as bytes, and the stage that failed.

/// What the moves found, in plain numbers so that a forked child can fill
/// it in without allocating and send it back as bytes.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Header {
    /// 0: ran to the end; else the [`Stage`] that failed.
    pub(super) failed_stage: u32,
    /// The errno of the failure.
    pub(super) errno: i32,
    pub(super) cpu_seen: i32,
    pub(super) placed: Count,
}

/// Pages of the buffer by where the kernel says they are.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Count {
    pub(super) on_node: u64,
    pub(super) elsewhere: u64,
    pub(super) untouched: u64,
    pub(super) unknown: u64,
}

/// Little-endian bytes of the numbers a forked child sends back: encoded
/// on the stack (no allocation), decoded by the parent.
pub(super) struct Bytes<const N: usize> {
    pub(super) b: [u8; N],
    at: usize,
}

impl<const N: usize> Bytes<N> {
    fn new() -> Self {
        Bytes { b: [0; N], at: 0 }
    }
    fn from(b: &[u8]) -> Self {
        let mut out = Self::new();
        out.b.copy_from_slice(&b[..N]);
        out
    }
    fn put(&mut self, v: [u8; 8]) -> &mut Self {
        self.b[self.at..self.at + 8].copy_from_slice(&v);
        self.at += 8;
        self
    }
    fn take(&mut self) -> [u8; 8] {
        let v = self.b[self.at..self.at + 8].try_into().expect("8 bytes");
        self.at += 8;
        v
    }
    fn put_count(&mut self, c: &Count) -> &mut Self {
        for v in [c.on_node, c.elsewhere, c.untouched, c.unknown] {
            self.put(v.to_le_bytes());
        }
        self
    }
    fn take_count(&mut self) -> Count {
        let mut v = [0u64; 4];
        for x in &mut v {
            *x = u64::from_le_bytes(self.take());
        }
        Count {
            on_node: v[0],
            elsewhere: v[1],
            untouched: v[2],
            unknown: v[3],
        }
    }
    /// Two 32-bit numbers in one 8-byte word.
    fn put_pair(&mut self, a: u32, b: u32) -> &mut Self {
        self.put((u64::from(a) | u64::from(b) << 32).to_le_bytes())
    }
    fn take_pair(&mut self) -> (u32, u32) {
        let w = u64::from_le_bytes(self.take());
        (w as u32, (w >> 32) as u32)
    }
}

impl Header {
    pub(super) const BYTES: usize = 16 + 32;

    pub(super) fn encode(&self) -> Bytes<{ Header::BYTES }> {
        let mut b = Bytes::new();
        b.put_pair(self.failed_stage, self.errno as u32)
            .put_pair(self.cpu_seen as u32, 0)
            .put_count(&self.placed);
        b
    }

    pub(super) fn decode(bytes: &[u8]) -> Header {
        let mut b = Bytes::<{ Header::BYTES }>::from(bytes);
        let (failed_stage, errno) = b.take_pair();
        let (cpu_seen, _) = b.take_pair();
        Header {
            failed_stage,
            errno: errno as i32,
            cpu_seen: cpu_seen as i32,
            placed: b.take_count(),
        }
    }
}

impl Rep {
    pub(super) const BYTES: usize = 8 + 32 + 8 + 8 + 32;

    pub(super) fn encode(&self) -> Bytes<{ Rep::BYTES }> {
        let mut b = Bytes::new();
        b.put(self.seconds.to_le_bytes())
            .put_count(&self.after)
            .put(self.failures.to_le_bytes())
            .put_pair(self.first_status as u32, 0)
            .put_count(&self.back);
        b
    }

    pub(super) fn decode(bytes: &[u8]) -> Rep {
        let mut b = Bytes::<{ Rep::BYTES }>::from(bytes);
        let seconds = f64::from_le_bytes(b.take());
        let after = b.take_count();
        let failures = u64::from_le_bytes(b.take());
        let (first_status, _) = b.take_pair();
        Rep {
            seconds,
            after,
            failures,
            first_status: first_status as i32,
            back: b.take_count(),
        }
    }
}

/// One timed forward move and its untimed way back.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Rep {
    pub(super) seconds: f64,
    pub(super) after: Count,
    /// Error statuses or pages reported not moved.
    pub(super) failures: u64,
    /// The first error status (a negative errno), 0 if none.
    pub(super) first_status: i32,
    pub(super) back: Count,
}

/// Where a measurement failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(super) enum Stage {
    Pin = 1,
    Bind = 2,
    Query = 3,
    Move = 4,
    MoveBack = 5,
    Policy = 6,
    Child = 7,
}

impl Stage {
    pub(super) fn of(code: u32) -> &'static str {
        match code {
            1 => "pinning the measuring thread",
            2 => "binding the buffer to its source node",
            3 => "asking the kernel where the pages are",
            4 => "moving the pages",
            5 => "moving the pages back",
            6 => "setting the child's memory policy",
            _ => "running the migrate_pages child",
        }
    }
}
