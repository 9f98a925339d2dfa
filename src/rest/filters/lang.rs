//! The filter language of HBase's `ParseFilter` (Thrift, shell, REST `filter=`).
//!
//! ```text
//! expr   := or
//! or     := and ( "OR" and )*             -- MUST_PASS_ONE
//! and    := unary ( "AND" unary )*        -- MUST_PASS_ALL; binds tighter than OR
//! unary  := "SKIP" unary | "WHILE" unary | "(" expr ")" | simple
//! simple := Name "(" [ arg { "," arg } ] ")"
//! arg    := 'quoted bytes' ('' is a quote) | bare token (number, boolean, <, <=, =, !=, >=, >)
//! ```
//! Keywords are upper-case and must be followed by whitespace or `(`. A comparator argument is a
//! quoted `type:value` with type `binary`, `binaryprefix`, `regexstring` or `substring`; the
//! value is the raw bytes after the first `:`. `regexstring` and `substring` only go with `=`
//! and `!=`. Argument counts and types are those of each filter's `createFilterFromArguments`.

use super::{Comparator, CompareOp, Filter, ListOp, SingleColumnValue, MAX_DEPTH};

/// Parses a filter-language string.
pub fn parse_filter_language(s: &str) -> Result<Filter, String> {
    parse_filter_language_bytes(s.as_bytes())
}

/// Parses a filter-language string given as bytes (for `filter_b64=`, whose literals may hold
/// any bytes).
pub fn parse_filter_language_bytes(input: &[u8]) -> Result<Filter, String> {
    let mut p = Parser { s: input, pos: 0 };
    p.skip_ws();
    if p.at_end() {
        return Err("the filter string is empty".to_string());
    }
    let filter = p.or_expr(0)?;
    p.skip_ws();
    match p.peek() {
        None => Ok(filter),
        Some(b')') => Err(format!(
            "unbalanced parentheses: unexpected ')' at byte {}",
            p.pos
        )),
        Some(_) => Err(format!(
            "unexpected text at byte {}: '{}' (filters are joined with AND or OR)",
            p.pos,
            p.snippet()
        )),
    }
}

/// One argument of a simple filter expression.
#[derive(Debug)]
enum Arg {
    Quoted(Vec<u8>),
    Bare(Vec<u8>),
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn at_end(&self) -> bool {
        self.pos >= self.s.len()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    /// Up to 30 bytes from the cursor, for messages.
    fn snippet(&self) -> String {
        let end = (self.pos + 30).min(self.s.len());
        String::from_utf8_lossy(&self.s[self.pos.min(end)..end]).into_owned()
    }

    /// Consumes `kw` if it is next and followed by whitespace or `(` (or ends the input, which
    /// then fails with "a filter was expected").
    fn eat_keyword(&mut self, kw: &[u8]) -> bool {
        let rest = &self.s[self.pos..];
        if rest.starts_with(kw)
            && rest
                .get(kw.len())
                .is_none_or(|b| b.is_ascii_whitespace() || *b == b'(')
        {
            self.pos += kw.len();
            true
        } else {
            false
        }
    }

    fn or_expr(&mut self, depth: usize) -> Result<Filter, String> {
        let mut items = vec![self.and_expr(depth)?];
        loop {
            self.skip_ws();
            if !self.eat_keyword(b"OR") {
                break;
            }
            items.push(self.and_expr(depth)?);
        }
        Ok(list_or_single(ListOp::MustPassOne, items))
    }

    fn and_expr(&mut self, depth: usize) -> Result<Filter, String> {
        let mut items = vec![self.unary(depth)?];
        loop {
            self.skip_ws();
            if !self.eat_keyword(b"AND") {
                break;
            }
            items.push(self.unary(depth)?);
        }
        Ok(list_or_single(ListOp::MustPassAll, items))
    }

    fn unary(&mut self, depth: usize) -> Result<Filter, String> {
        if depth > MAX_DEPTH {
            return Err(format!(
                "the filter is nested more than {MAX_DEPTH} levels deep"
            ));
        }
        self.skip_ws();
        if self.eat_keyword(b"SKIP") {
            return Ok(Filter::Skip(Box::new(self.unary(depth + 1)?)));
        }
        if self.eat_keyword(b"WHILE") {
            return Ok(Filter::WhileMatch(Box::new(self.unary(depth + 1)?)));
        }
        match self.peek() {
            None => Err("the filter string ends where a filter was expected".to_string()),
            Some(b'(') => {
                let open = self.pos;
                self.pos += 1;
                let inner = self.or_expr(depth + 1)?;
                self.skip_ws();
                if self.peek() == Some(b')') {
                    self.pos += 1;
                    Ok(inner)
                } else if self.at_end() {
                    Err(format!(
                        "unbalanced parentheses: '(' at byte {open} is never closed"
                    ))
                } else {
                    Err(format!(
                        "expected ')' to close '(' at byte {open}, found '{}' at byte {}",
                        self.snippet(),
                        self.pos
                    ))
                }
            }
            Some(b')') => Err(format!(
                "unbalanced parentheses: unexpected ')' at byte {} where a filter was expected",
                self.pos
            )),
            Some(_) => self.simple(),
        }
    }

    /// `Name(args)`.
    fn simple(&mut self) -> Result<Filter, String> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|b| !b.is_ascii_whitespace() && !matches!(b, b'(' | b')' | b'\'' | b','))
        {
            self.pos += 1;
        }
        let name = String::from_utf8_lossy(&self.s[start..self.pos]).into_owned();
        if name.is_empty() {
            return Err(format!(
                "expected a filter name at byte {start}, found '{}'",
                self.snippet()
            ));
        }
        self.skip_ws();
        if self.peek() != Some(b'(') {
            return Err(format!(
                "expected '(' after the filter name {name} at byte {}",
                self.pos
            ));
        }
        self.pos += 1;
        let args = self.arguments(&name)?;
        build(&name, args)
    }

    /// The arguments up to and including the closing `)`.
    fn arguments(&mut self, name: &str) -> Result<Vec<Arg>, String> {
        let mut args = Vec::new();
        loop {
            while self
                .peek()
                .is_some_and(|b| b.is_ascii_whitespace() || b == b',')
            {
                self.pos += 1;
            }
            match self.peek() {
                None => {
                    return Err(format!(
                        "unbalanced parentheses: the argument list of {name} is not closed"
                    ))
                }
                Some(b')') => {
                    self.pos += 1;
                    return Ok(args);
                }
                Some(b'\'') => {
                    let open = self.pos;
                    self.pos += 1;
                    let mut bytes = Vec::new();
                    loop {
                        match self.peek() {
                            None => {
                                return Err(format!(
                                    "unterminated quoted argument of {name} starting at byte {open}"
                                ))
                            }
                            Some(b'\'') if self.s.get(self.pos + 1) == Some(&b'\'') => {
                                bytes.push(b'\'');
                                self.pos += 2;
                            }
                            Some(b'\'') => {
                                self.pos += 1;
                                break;
                            }
                            Some(b) => {
                                bytes.push(b);
                                self.pos += 1;
                            }
                        }
                    }
                    args.push(Arg::Quoted(bytes));
                }
                Some(_) => {
                    let start = self.pos;
                    while self
                        .peek()
                        .is_some_and(|b| !b.is_ascii_whitespace() && !matches!(b, b',' | b')'))
                    {
                        self.pos += 1;
                    }
                    args.push(Arg::Bare(self.s[start..self.pos].to_vec()));
                }
            }
        }
    }
}

fn list_or_single(op: ListOp, mut items: Vec<Filter>) -> Filter {
    if items.len() == 1 {
        if let Some(f) = items.pop() {
            return f;
        }
    }
    Filter::List(op, items)
}

/// The arguments of one filter, with its name for messages.
struct Args<'a> {
    name: &'a str,
    args: Vec<Arg>,
}

impl Args<'_> {
    fn expect(&self, counts: &[usize]) -> Result<(), String> {
        if counts.contains(&self.args.len()) {
            return Ok(());
        }
        let expected = counts
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(" or ");
        Err(format!(
            "{} takes {expected} argument(s), got {}",
            self.name,
            self.args.len()
        ))
    }

    fn quoted(&self, i: usize) -> Result<Vec<u8>, String> {
        match self.args.get(i) {
            Some(Arg::Quoted(b)) => Ok(b.clone()),
            Some(Arg::Bare(b)) => Err(format!(
                "argument {} of {} must be a quoted string like 'abc', got {}",
                i + 1,
                self.name,
                String::from_utf8_lossy(b)
            )),
            None => Err(format!("{} is missing argument {}", self.name, i + 1)),
        }
    }

    fn bare(&self, i: usize) -> Result<&[u8], String> {
        match self.args.get(i) {
            Some(Arg::Bare(b)) => Ok(b),
            Some(Arg::Quoted(b)) => Err(format!(
                "argument {} of {} must not be quoted, got '{}'",
                i + 1,
                self.name,
                String::from_utf8_lossy(b)
            )),
            None => Err(format!("{} is missing argument {}", self.name, i + 1)),
        }
    }

    /// `ParseFilter.convertByteArrayToLong`: optional `-`, then digits.
    fn long(&self, i: usize) -> Result<i64, String> {
        let b = self.bare(i)?;
        let text = String::from_utf8_lossy(b);
        let digits = b.strip_prefix(b"-").unwrap_or(b);
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return Err(format!(
                "argument {} of {} must be an integer, got {text}",
                i + 1,
                self.name
            ));
        }
        text.parse::<i64>()
            .map_err(|_| format!("argument {} of {} is too large: {text}", i + 1, self.name))
    }

    /// A non-negative Java `int`.
    fn count(&self, i: usize) -> Result<u32, String> {
        let n = self.long(i)?;
        if n < 0 {
            return Err(format!(
                "argument {} of {} must not be negative (got {n})",
                i + 1,
                self.name
            ));
        }
        i32::try_from(n)
            .ok()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| format!("argument {} of {} is too large: {n}", i + 1, self.name))
    }

    fn boolean(&self, i: usize) -> Result<bool, String> {
        let b = self.bare(i)?;
        if b.eq_ignore_ascii_case(b"true") {
            Ok(true)
        } else if b.eq_ignore_ascii_case(b"false") {
            Ok(false)
        } else {
            Err(format!(
                "argument {} of {} must be true or false, got {}",
                i + 1,
                self.name,
                String::from_utf8_lossy(b)
            ))
        }
    }

    fn op(&self, i: usize) -> Result<CompareOp, String> {
        CompareOp::from_symbol(self.bare(i)?).map_err(|e| format!("{}: {e}", self.name))
    }

    /// A quoted `type:value` comparator.
    fn comparator(&self, i: usize) -> Result<Comparator, String> {
        let spec = self.quoted(i)?;
        let Some(colon) = spec.iter().position(|b| *b == b':') else {
            return Err(format!(
                "the comparator of {} must look like 'binary:value' (types: binary, \
                 binaryprefix, regexstring, substring), got '{}'",
                self.name,
                String::from_utf8_lossy(&spec)
            ));
        };
        let (ty, value) = (&spec[..colon], &spec[colon + 1..]);
        if ty.eq_ignore_ascii_case(b"binary") {
            Ok(Comparator::Binary(value.to_vec()))
        } else if ty.eq_ignore_ascii_case(b"binaryprefix") {
            Ok(Comparator::BinaryPrefix(value.to_vec()))
        } else if ty.eq_ignore_ascii_case(b"regexstring") {
            Comparator::regex(&String::from_utf8_lossy(value))
        } else if ty.eq_ignore_ascii_case(b"substring") {
            Ok(Comparator::substring(&String::from_utf8_lossy(value)))
        } else {
            Err(format!(
                "unknown comparator type '{}' in {} (expected binary, binaryprefix, regexstring \
                 or substring)",
                String::from_utf8_lossy(ty),
                self.name
            ))
        }
    }

    /// An op and a comparator, with HBase's rule that string matchers only test (in)equality.
    fn op_and_comparator(&self, op_at: usize) -> Result<(CompareOp, Comparator), String> {
        let op = self.op(op_at)?;
        let comparator = self.comparator(op_at + 1)?;
        if comparator.is_string_matcher() && !matches!(op, CompareOp::Equal | CompareOp::NotEqual) {
            return Err(format!(
                "{}: a regexstring or substring comparator can only be used with = and !=",
                self.name
            ));
        }
        Ok((op, comparator))
    }
}

/// `createFilterFromArguments` of each filter the language knows.
fn build(name: &str, args: Vec<Arg>) -> Result<Filter, String> {
    let a = Args { name, args };
    Ok(match name {
        "KeyOnlyFilter" => {
            a.expect(&[0, 1])?;
            Filter::KeyOnly {
                len_as_val: a.args.len() == 1 && a.boolean(0)?,
            }
        }
        "FirstKeyOnlyFilter" => {
            a.expect(&[0])?;
            Filter::FirstKeyOnly
        }
        "PrefixFilter" => {
            a.expect(&[1])?;
            Filter::Prefix(a.quoted(0)?)
        }
        "ColumnPrefixFilter" => {
            a.expect(&[1])?;
            Filter::ColumnPrefix(a.quoted(0)?)
        }
        "MultipleColumnPrefixFilter" => {
            let mut prefixes = (0..a.args.len())
                .map(|i| a.quoted(i))
                .collect::<Result<Vec<_>, _>>()?;
            prefixes.sort();
            prefixes.dedup();
            Filter::MultipleColumnPrefix(prefixes)
        }
        "ColumnCountGetFilter" => {
            a.expect(&[1])?;
            Filter::ColumnCountGet(a.count(0)?)
        }
        "PageFilter" => {
            a.expect(&[1])?;
            let n = a.long(0)?;
            if n < 0 {
                return Err(format!(
                    "the page size of PageFilter must not be negative (got {n})"
                ));
            }
            Filter::Page(n.unsigned_abs())
        }
        "ColumnPaginationFilter" => {
            a.expect(&[2])?;
            Filter::ColumnPagination {
                limit: a.count(0)?,
                offset: a.count(1)?,
            }
        }
        "InclusiveStopFilter" => {
            a.expect(&[1])?;
            Filter::InclusiveStop {
                stop: a.quoted(0)?,
                reversed: false,
            }
        }
        "TimestampsFilter" => {
            let mut stamps = Vec::with_capacity(a.args.len());
            for i in 0..a.args.len() {
                let ts = a.long(i)?;
                if ts < 0 {
                    return Err(format!(
                        "timestamps of TimestampsFilter must not be negative (got {ts})"
                    ));
                }
                stamps.push(ts);
            }
            stamps.sort_unstable();
            stamps.dedup();
            Filter::Timestamps(stamps)
        }
        "RowFilter" | "FamilyFilter" | "QualifierFilter" | "ValueFilter" => {
            a.expect(&[2])?;
            let (op, cmp) = a.op_and_comparator(0)?;
            match name {
                "RowFilter" => Filter::Row(op, cmp),
                "FamilyFilter" => Filter::Family(op, cmp),
                "QualifierFilter" => Filter::Qualifier(op, cmp),
                _ => Filter::Value(op, cmp),
            }
        }
        "ColumnRangeFilter" => {
            a.expect(&[4])?;
            let min = a.quoted(0)?;
            let max = a.quoted(2)?;
            Filter::ColumnRange {
                min: (!min.is_empty()).then_some(min),
                min_inclusive: a.boolean(1)?,
                max: (!max.is_empty()).then_some(max),
                max_inclusive: a.boolean(3)?,
            }
        }
        "SingleColumnValueFilter" | "SingleColumnValueExcludeFilter" => {
            a.expect(&[4, 6])?;
            let (op, comparator) = a.op_and_comparator(2)?;
            let (filter_if_missing, latest_version_only) = if a.args.len() == 6 {
                (a.boolean(4)?, a.boolean(5)?)
            } else {
                (false, true)
            };
            Filter::SingleColumnValue(Box::new(SingleColumnValue {
                family: a.quoted(0)?,
                qualifier: a.quoted(1)?,
                op,
                comparator,
                filter_if_missing,
                latest_version_only,
                exclude: name == "SingleColumnValueExcludeFilter",
            }))
        }
        "DependentColumnFilter" => {
            a.expect(&[2, 3, 5])?;
            let drop_dependent = a.args.len() >= 3 && a.boolean(2)?;
            // HBase's DependentColumnFilter does not restrict string matchers to = and !=.
            let compare = if a.args.len() == 5 {
                Some((a.op(3)?, a.comparator(4)?))
            } else {
                None
            };
            Filter::DependentColumn {
                family: a.quoted(0)?,
                qualifier: a.quoted(1)?,
                drop_dependent,
                compare,
            }
        }
        "ColumnValueFilter" => {
            a.expect(&[4])?;
            let (op, comparator) = a.op_and_comparator(2)?;
            Filter::ColumnValue {
                family: a.quoted(0)?,
                qualifier: a.quoted(1)?,
                op,
                comparator,
            }
        }
        _ => return Err(format!("unknown filter type: {name}")),
    })
}
