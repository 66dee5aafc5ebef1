//! The sorted page of a filtered row set: the plan (scan every row's keys, or walk the
//! first key's value order), the request's columns and cursor, and the walk itself.

use super::*;

/// How [`FieldIndex::page_with_plan`] finds a page; all plans give the same page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PagePlan {
    /// Choose per call by estimated cost (what [`FieldIndex::page`] does).
    #[default]
    Auto,
    /// Compute the sort keys of every row.
    Scan,
    /// Walk the first key's value order when its field allows it (keyword, integer, float,
    /// datetime), whatever the cost; otherwise scan.
    Walk,
}

/// The cost model of [`FieldIndex::page`]'s choice, in nanoseconds, measured in release on
/// 1M rows with `examples/page_bench.rs` (one thread; the columns are out of cache).
pub(super) mod cost {
    use roaring::RoaringBitmap;

    /// One walk visit: a sequential read of the value-sorted arrays and a lookup in the
    /// bitmap of rows (two binary searches, ~25 ns; ~12 once [`super::RowSet`] has its
    /// bit set).
    pub const VISIT_NS: f64 = 25.0;
    /// One sort key of one row met at random (the walk's matching rows, a sparse scan): its
    /// column's offsets and values are cache misses. Measured 180-260 ns.
    pub const KEY_NS: f64 = 250.0;
    /// One sort key of one row in a dense scan (consecutive rows share cache lines and the
    /// prefetcher streams the columns). Measured 25-35 ns.
    pub const DENSE_KEY_NS: f64 = 30.0;
    /// One row of a scan sorted by the id with an [`super::IdOrder`]: its rank (a random
    /// read) compared as an integer.
    pub const ID_SCAN_NS: f64 = 10.0;

    /// Segments up to this many rows keep their sort columns in the core's caches (a few
    /// hundred KiB a column), so a key met at random costs about what a dense one does.
    pub const CACHED_ROWS: u32 = 65_536;

    /// One sort key of one row met at random in a segment of `docs` rows.
    pub fn random_key_ns(docs: u32) -> f64 {
        if docs <= CACHED_ROWS {
            DENSE_KEY_NS
        } else {
            KEY_NS
        }
    }

    /// The scan's cost per row and key: dense when the rows are on average at most 32 apart.
    pub fn scan_row_ns(rows: &RoaringBitmap, docs: u32) -> f64 {
        if rows.len() * 32 >= u64::from(docs) {
            DENSE_KEY_NS
        } else {
            random_key_ns(docs)
        }
    }
}

/// A segment's ids in sort order, for [`FieldIndex::page_with`]: `rank[row]` is the row's
/// position among the segment's ids in the order of [`DocId`]'s `Ord` (integers before
/// strings, integers numerically, strings bytewise), and `by_rank` is its inverse. With it a
/// page compares ids as integers (no id is fetched or compared as a string; a run of ten
/// thousand rows tying on the sort keys used to cost a string id each) and an `id` sort walks
/// the rows in id order instead of sorting the matching rows.
#[derive(Clone, Copy, Debug)]
pub struct IdOrder<'a> {
    /// The rank of each row.
    pub rank: &'a [u32],
    /// The row at each rank.
    pub by_rank: &'a [u32],
}

impl<'a> IdOrder<'a> {
    /// The ranks and their inverse of `ids` (in row order).
    pub fn build(ids: &[DocId]) -> (Vec<u32>, Vec<u32>) {
        let mut by_rank: Vec<u32> = (0..ids.len() as u32).collect();
        by_rank.sort_unstable_by(|&a, &b| ids[a as usize].cmp(&ids[b as usize]));
        let mut rank = vec![0u32; ids.len()];
        for (r, &row) in by_rank.iter().enumerate() {
            rank[row as usize] = r as u32;
        }
        (rank, by_rank)
    }
}

/// An id as a page compares it: the segment's id rank as `2 * rank + 1` when the page has an
/// [`IdOrder`] (a cursor's id not in the segment sits between two ranks, at `2 * insertion
/// point`), else the id itself. One request uses one kind throughout.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum IdKey {
    Rank(u64),
    Doc(DocId),
}

/// A `search_after` cursor as compact keys: one per sort key (`K::Id` at id keys), the id (of
/// an `Id` key or the implicit tiebreaker) and how many positions it has.
pub(super) struct Cursor {
    pub(super) keys: Vec<K>,
    pub(super) id: Option<IdKey>,
    pub(super) len: usize,
}

/// What [`Req::top_one_key`] needs: the sort column and the cursor as integer codes.
#[derive(Clone, Copy)]
pub(super) struct OneKey<'a> {
    col: &'a Column,
    cursor: Option<(u128, Option<u64>)>,
}

/// A row that may enter the page, with its keys and id.
pub(super) struct Cand {
    pub(super) row: u32,
    pub(super) keys: Vec<K>,
    pub(super) id: IdKey,
}

/// One page request: keys, their columns, the cursor and the id lookup.
pub(super) struct Req<'a> {
    pub(super) keys: &'a [SortKey],
    pub(super) cols: Vec<Option<&'a Column>>,
    pub(super) implicit: bool,
    pub(super) cursor: Option<Cursor>,
    pub(super) id_of: &'a dyn Fn(u32) -> DocId,
    pub(super) order: Option<IdOrder<'a>>,
}

impl<'a> Req<'a> {
    pub(super) fn new(
        idx: &'a FieldIndex,
        keys: &'a [SortKey],
        after: Option<&[SortValue]>,
        id_of: &'a dyn Fn(u32) -> DocId,
        order: Option<IdOrder<'a>>,
    ) -> Req<'a> {
        let implicit = !keys.iter().any(|k| k.by == SortBy::Id);
        let nk = keys.len();
        let cursor = after.map(|a| {
            let mut ks = Vec::with_capacity(nk);
            let mut id = None;
            for (i, v) in a.iter().enumerate().take(nk + usize::from(implicit)) {
                match keys.get(i) {
                    Some(key) if key.by != SortBy::Id => ks.push(idx.cursor_key(v, key)),
                    _ => {
                        if i < nk {
                            ks.push(K::Id);
                        }
                        id = match v {
                            SortValue::Id(d) => Some(d.clone()),
                            SortValue::Str(s) => Some(DocId::Str(s.clone())),
                            SortValue::Int(n) if *n >= 0 => Some(DocId::Int(*n as u64)),
                            _ => None,
                        }
                        .map(|d| match order {
                            Some(o) => IdKey::Rank(cursor_rank(o, id_of, &d)),
                            None => IdKey::Doc(d),
                        });
                    }
                }
            }
            let len = a.len().min(nk + usize::from(implicit));
            ks.resize(nk, K::Missing);
            Cursor { keys: ks, id, len }
        });
        let cols = keys
            .iter()
            .map(|k| match &k.by {
                SortBy::Field(f) => idx.col(f),
                _ => None,
            })
            .collect();
        Req {
            keys,
            cols,
            implicit,
            cursor,
            id_of,
            order,
        }
    }

    /// The id key of `row` (see [`IdKey`]).
    pub(super) fn id_key(&self, row: u32) -> IdKey {
        match self.order {
            Some(o) => IdKey::Rank(2 * u64::from(o.rank[row as usize]) + 1),
            None => IdKey::Doc((self.id_of)(row)),
        }
    }

    /// The page order of two candidates.
    pub(super) fn cmp(&self, a: &Cand, b: &Cand) -> Ordering {
        let full = self.keys.len() + usize::from(self.implicit);
        cmp_entries(
            self.keys,
            self.implicit,
            &a.keys,
            &mut || a.id.clone(),
            &b.keys,
            Some(&b.id),
            full,
        )
    }

    /// The plain integers [`Req::top_one_key`] orders by, when the request allows it: one sort
    /// key on a field of this segment, the implicit id tiebreaker, the segment's id order, and
    /// a cursor (if any) whose first value is of the column's kind. Gives the column and the
    /// cursor as `(first key code, id key or None when the cursor stops at the first key)`.
    fn one_key(&self) -> Option<OneKey<'a>> {
        let (order, col) = match (self.keys, self.cols.as_slice(), self.order) {
            ([k], [Some(c)], Some(_)) if self.implicit && matches!(k.by, SortBy::Field(_)) => {
                (k.order, *c)
            }
            _ => return None,
        };
        let kind = kind_of(col);
        let cursor = match &self.cursor {
            None => None,
            Some(c) => {
                let code = first_code(c.keys.first()?, order, Some(&kind))?;
                let id = match (&c.id, c.len > 1) {
                    (Some(IdKey::Rank(r)), true) => Some(*r),
                    _ => None,
                };
                Some((code, id))
            }
        };
        Some(OneKey { col, cursor })
    }

    /// [`Req::top`] for a [`Req::one_key`] request: rows compared as `(first key code, id
    /// rank)` integer pairs (a few nanoseconds a row instead of the general comparison's
    /// tens), and the sort keys of the `need` kept rows made at the end.
    fn top_one_key(
        &self,
        f: OneKey,
        rows: impl Iterator<Item = u32>,
        need: usize,
        group: Option<K>,
    ) -> Vec<Cand> {
        let key = &self.keys[0];
        let Some(order) = self.order else {
            return Vec::new();
        };
        let cap = need.saturating_mul(2).max(need.saturating_add(1024));
        let mut buf: Vec<(u128, u64, u32)> = Vec::new();
        let mut thr: Option<(u128, u64)> = None;
        for row in rows {
            let k = key_of_col(Some(f.col), row, key);
            if group.is_some_and(|g| cmp_k(Order::Asc, &k, &g) != Ordering::Equal) {
                continue;
            }
            let Some(code) = first_code(&k, key.order, None) else {
                continue;
            };
            let id = 2 * u64::from(order.rank[row as usize]) + 1;
            match f.cursor {
                Some((c, Some(cid))) if (code, id) <= (c, cid) => continue,
                Some((c, None)) if code <= c => continue,
                _ => {}
            }
            if thr.is_some_and(|t| (code, id) >= t) {
                continue;
            }
            buf.push((code, id, row));
            if buf.len() >= cap {
                buf.select_nth_unstable(need - 1);
                buf.truncate(need);
                let w = buf[need - 1];
                thr = Some((w.0, w.1));
            }
        }
        buf.sort_unstable();
        buf.truncate(need);
        buf.into_iter()
            .map(|(_, id, row)| Cand {
                row,
                keys: vec![key_of_col(Some(f.col), row, key)],
                id: IdKey::Rank(id),
            })
            .collect()
    }

    /// The first `need` of `rows` strictly after the cursor, sorted: one pass with a bounded
    /// buffer. With `group`, rows whose first key is not `group` are skipped (the walk meets a
    /// multi-valued row at each of its values and takes it only at its sort value).
    pub(super) fn top(
        &self,
        rows: impl IntoIterator<Item = u32>,
        need: usize,
        group: Option<K>,
    ) -> Vec<Cand> {
        let rows = rows.into_iter();
        if let Some(f) = self.one_key() {
            return self.top_one_key(f, rows, need, group);
        }
        let keys = self.keys;
        let full = keys.len() + usize::from(self.implicit);
        let cmp = |a: &Cand, b: &Cand| self.cmp(a, b);
        let mut buf: Vec<Cand> = Vec::new();
        let mut thr: Option<Cand> = None;
        let mut scratch = vec![K::Missing; keys.len()];
        // Most rows of a scan are decided by their first key alone: before the cursor's or
        // after the page's current last row. That test compares integer codes of the first
        // key (see [`first_code`]); the full comparison (other keys, the id) is for the rows
        // that tie it.
        let first = keys.first().zip(self.cols.first());
        let order0 = first.map_or(Order::Asc, |(k, _)| k.order);
        let kind0 = first.and_then(|(_, c)| c.map(kind_of));
        let cursor_code = self
            .cursor
            .as_ref()
            .filter(|c| c.len > 0)
            .and_then(|c| c.keys.first())
            .and_then(|k| first_code(k, order0, kind0.as_ref()));
        let mut thr_code: Option<u128> = None;
        for row in rows {
            // The first key alone first: with `group` it may skip the row.
            let mut it = scratch.iter_mut().zip(keys).zip(&self.cols);
            if let Some(((s, key), col)) = it.next() {
                *s = key_of_col(*col, row, key);
                if group.is_some_and(|g| cmp_k(Order::Asc, s, &g) != Ordering::Equal) {
                    continue;
                }
                if thr_code.is_some() || cursor_code.is_some() {
                    if let Some(c) = first_code(s, order0, None) {
                        if thr_code.is_some_and(|t| c > t) || cursor_code.is_some_and(|k| c < k) {
                            continue;
                        }
                    }
                }
            }
            for ((s, key), col) in it {
                *s = key_of_col(*col, row, key);
            }
            let mut id: Option<IdKey> = None;
            let mut get_id = || id.get_or_insert_with(|| self.id_key(row)).clone();
            if let Some(c) = &self.cursor {
                if cmp_entries(
                    keys,
                    self.implicit,
                    &scratch,
                    &mut get_id,
                    &c.keys,
                    c.id.as_ref(),
                    c.len,
                ) != Ordering::Greater
                {
                    continue;
                }
            }
            if let Some(t) = &thr {
                if cmp_entries(
                    keys,
                    self.implicit,
                    &scratch,
                    &mut get_id,
                    &t.keys,
                    Some(&t.id),
                    full,
                ) != Ordering::Less
                {
                    continue;
                }
            }
            let id = get_id();
            buf.push(Cand {
                row,
                keys: scratch.clone(),
                id,
            });
            if buf.len() >= need.saturating_mul(2).max(need.saturating_add(1024)) {
                buf.select_nth_unstable_by(need - 1, cmp);
                buf.truncate(need);
                let w = &buf[need - 1];
                thr = Some(Cand {
                    row: w.row,
                    keys: w.keys.clone(),
                    id: w.id.clone(),
                });
                thr_code = thr
                    .as_ref()
                    .and_then(|t| t.keys.first())
                    .and_then(|k| first_code(k, order0, None));
            }
        }
        buf.sort_by(cmp);
        buf.truncate(need);
        buf
    }
}

/// An integer whose order is [`cmp_k`]'s for first keys of one column: values of the
/// column's kind (integers, floats by total order, keyword ordinals, bools), reversed for
/// `Desc`, and missing values after all of them both ways. `None` for id and score keys, and
/// — when `like` (a key of the column) is given — for a key of another kind (a cursor's
/// integer on a float column compares through [`cmp_k`]).
#[inline]
fn first_code(k: &K, order: Order, like: Option<&K>) -> Option<u128> {
    let v = match k {
        K::Missing => return Some(1 << 64),
        K::I(x) => (*x as u64) ^ (1 << 63),
        K::F(x) => {
            let b = x.to_bits();
            if b >> 63 == 1 {
                !b
            } else {
                b | (1 << 63)
            }
        }
        K::O(x) => *x,
        K::B(b) => u64::from(*b),
        K::Nil | K::Id => return None,
    };
    if let Some(l) = like {
        if std::mem::discriminant(l) != std::mem::discriminant(k) {
            return None;
        }
    }
    Some(u128::from(if order == Order::Desc { !v } else { v }))
}

/// A key of `col`'s kind (its value is meaningless), for [`first_code`]'s `like`.
fn kind_of(col: &Column) -> K {
    match col {
        Column::Int(_) => K::I(0),
        Column::Float(_) => K::F(0.0),
        Column::Keyword(_) => K::O(0),
        Column::Bool(_) => K::B(false),
    }
}

/// A cursor id's position among the segment's ids: `2 * rank + 1` when a row has it, else
/// `2 * (ranks of smaller ids)`.
fn cursor_rank(o: IdOrder, id_of: &dyn Fn(u32) -> DocId, d: &DocId) -> u64 {
    let p = o.by_rank.partition_point(|&row| id_of(row) < *d);
    let exact = o.by_rank.get(p).is_some_and(|&row| id_of(row) == *d);
    2 * p as u64 + u64::from(exact)
}

/// A first-key column in value order: positions `0..len()` are the value-sorted entries of a
/// numeric column, or the dictionary ordinals of a keyword column.
pub(super) enum Walk<'a> {
    Int(&'a NumCol<i64>),
    Float(&'a NumCol<f64>),
    Keyword(&'a KeywordCol),
}

impl<'a> Walk<'a> {
    pub(super) fn of(col: Option<&'a Column>) -> Option<Walk<'a>> {
        match col? {
            Column::Int(c) => Some(Walk::Int(c)),
            Column::Float(c) => Some(Walk::Float(c)),
            Column::Keyword(c) => Some(Walk::Keyword(c)),
            Column::Bool(_) => None,
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Walk::Int(c) => c.sorted_values.len(),
            Walk::Float(c) => c.sorted_values.len(),
            Walk::Keyword(c) => c.dict.len(),
        }
    }

    /// The number of (value, row) entries.
    pub(super) fn entries(&self) -> u64 {
        match self {
            Walk::Int(c) => c.sorted_values.len() as u64,
            Walk::Float(c) => c.sorted_values.len() as u64,
            Walk::Keyword(c) => c.ords.len() as u64,
        }
    }

    /// The rows with a value (the writer sets exactly the rows with at least one value).
    pub(super) fn present(&self) -> &RoaringBitmap {
        match self {
            Walk::Int(c) => &c.present,
            Walk::Float(c) => &c.present,
            Walk::Keyword(c) => &c.present,
        }
    }

    /// The sort key of position `i`.
    pub(super) fn key(&self, i: usize) -> K {
        match self {
            Walk::Int(c) => K::I(c.sorted_values[i]),
            Walk::Float(c) => K::F(c.sorted_values[i]),
            Walk::Keyword(_) => K::O(2 * i as u64 + 1),
        }
    }

    /// Whether position `i` has the key `k` (keyword positions are distinct values).
    pub(super) fn same(&self, i: usize, k: &K) -> bool {
        match self {
            Walk::Keyword(_) => false,
            _ => cmp_k(Order::Asc, &self.key(i), k) == Ordering::Equal,
        }
    }

    /// The entries of the run of equal values containing position `i`.
    pub(super) fn run_entries(&self, i: usize) -> u64 {
        fn run<T: Copy>(v: &[T], i: usize, eq: impl Fn(T, T) -> bool) -> u64 {
            let x = v[i];
            let lo = v[..i].iter().rev().take_while(|&&y| eq(x, y)).count();
            let hi = v[i..].iter().take_while(|&&y| eq(x, y)).count();
            (lo + hi) as u64
        }
        match self {
            Walk::Int(c) => run(&c.sorted_values, i, |a, b| a == b),
            Walk::Float(c) => run(&c.sorted_values, i, |a, b| a.total_cmp(&b).is_eq()),
            Walk::Keyword(c) => c.postings[i].len(),
        }
    }

    /// The rows of positions `lo..hi` (one run of equal values) that are in `set`, and the
    /// cost of finding them in walk visits.
    pub(super) fn members(&self, lo: usize, hi: usize, set: &mut RowSet) -> (Vec<u32>, f64) {
        let mut sorted = |r: &[u32]| -> (Vec<u32>, f64) {
            let before = set.cost;
            let m = r[lo..hi]
                .iter()
                .copied()
                .filter(|&x| set.contains(x))
                .collect();
            (m, set.cost - before)
        };
        match self {
            Walk::Int(c) => sorted(&c.sorted_rows),
            Walk::Float(c) => sorted(&c.sorted_rows),
            Walk::Keyword(c) => {
                let p = &c.postings[lo];
                let visits = p.len().min(set.rows.len()) as f64;
                ((p & set.rows).iter().collect(), visits)
            }
        }
    }
}

/// Membership in the page's rows for the walk: the bitmap's own lookup (two binary searches,
/// ~25 ns), switching to a plain bit set once the walk has done enough lookups for building
/// it (~1-2 ns a row of `rows`) to pay off; a lookup in it costs about a fifth.
pub(super) struct RowSet<'a> {
    pub(super) rows: &'a RoaringBitmap,
    pub(super) bits: Option<Vec<u64>>,
    pub(super) lookups: u64,
    /// Lookups so far, in bitmap lookups (see [`RowSet::BITS_COST`]).
    pub(super) cost: f64,
}

impl<'a> RowSet<'a> {
    /// What a bit-set lookup costs relative to a bitmap lookup (with the walk's other work
    /// per entry: ~12 ns against ~25 ns).
    const BITS_COST: f64 = 0.5;

    pub(super) fn new(rows: &'a RoaringBitmap) -> RowSet<'a> {
        RowSet {
            rows,
            bits: None,
            lookups: 0,
            cost: 0.0,
        }
    }

    pub(super) fn contains(&mut self, row: u32) -> bool {
        if let Some(b) = &self.bits {
            self.cost += Self::BITS_COST;
            return b
                .get(row as usize / 64)
                .is_some_and(|w| w >> (row % 64) & 1 == 1);
        }
        self.lookups += 1;
        self.cost += 1.0;
        let span = u64::from(self.rows.max().unwrap_or(0)) / 64;
        if self.lookups > 1024 + self.rows.len() / 8 + span / 16 {
            let mut b = vec![0u64; span as usize + 1];
            for r in self.rows {
                b[r as usize / 64] |= 1 << (r % 64);
            }
            self.bits = Some(b);
        }
        self.rows.contains(row)
    }
}

#[inline]
pub(super) fn key_of_col(col: Option<&Column>, row: u32, key: &SortKey) -> K {
    if !matches!(key.by, SortBy::Field(_)) {
        return if key.by == SortBy::Id { K::Id } else { K::Nil };
    }
    let desc = key.order == Order::Desc;
    match col {
        None => K::Missing,
        Some(Column::Keyword(c)) => {
            let r = c.row(row);
            let o = if desc { r.last() } else { r.first() };
            o.map_or(K::Missing, |&o| K::O(2 * u64::from(o) + 1))
        }
        Some(Column::Int(c)) => {
            let r = c.row(row);
            let o = if desc { r.last() } else { r.first() };
            o.map_or(K::Missing, |&v| K::I(v))
        }
        Some(Column::Float(c)) => {
            let r = c.row(row);
            let o = if desc { r.last() } else { r.first() };
            o.map_or(K::Missing, |&v| K::F(v))
        }
        Some(Column::Bool(c)) => {
            let (t, f) = (c.t.contains(row), c.f.contains(row));
            match (t, f) {
                (false, false) => K::Missing,
                (true, true) => K::B(desc),
                (t, _) => K::B(t),
            }
        }
    }
}
