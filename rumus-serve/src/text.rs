//! The text of a sequence's generated tokens, handed out in pieces as soon as it is final.
//!
//! Two things keep text back for a while: a character whose UTF-8 bytes are split across
//! tokens (decoded alone, its first token gives U+FFFD), and text that may be the start of
//! a stop string (`"\n\nUser:"` arriving a token at a time must not reach the client before
//! it is known to be a stop, since the stop and what follows it are cut).

/// The decoded text of the tokens generated so far and how much of it has gone out.
pub struct TextStream {
    ids: Vec<i64>,
    text: String,
    /// Bytes of `text` handed out.
    sent: usize,
    stops: Vec<String>,
    /// Bytes at the end of the text held back while they may begin a stop string.
    hold: usize,
}

/// What one more token gives: the text now final, and whether a stop string ended the
/// sequence (the stop itself and anything after it are not in `text`).
#[derive(Debug, Default, PartialEq)]
pub struct Piece {
    pub text: String,
    pub stopped: bool,
}

impl TextStream {
    /// A stream that ends at the first of `stops` (empty ones ignored).
    pub fn new(stops: Vec<String>) -> TextStream {
        let stops: Vec<String> = stops.into_iter().filter(|s| !s.is_empty()).collect();
        let hold = stops.iter().map(|s| s.len() - 1).max().unwrap_or(0);
        TextStream {
            ids: Vec::new(),
            text: String::new(),
            sent: 0,
            stops,
            hold,
        }
    }

    /// Adds token `id`, whose text `decode` gives for the whole list of tokens so far.
    ///
    /// # Errors
    /// What `decode` returns.
    pub fn push<E>(
        &mut self,
        id: i64,
        decode: impl Fn(&[i64]) -> Result<String, E>,
    ) -> Result<Piece, E> {
        self.ids.push(id);
        let text = decode(&self.ids)?;
        // A split character: wait for the token that completes it.
        if text.ends_with('\u{FFFD}') {
            return Ok(Piece::default());
        }
        self.text = text;
        // Text already sent never changes (the decoder is byte-level), but guard anyway.
        if !self.text.is_char_boundary(self.sent) || self.text.len() < self.sent {
            self.sent = floor_boundary(&self.text, self.sent.min(self.text.len()));
        }
        let search_from = floor_boundary(&self.text, self.sent.saturating_sub(self.hold));
        let stop = self
            .stops
            .iter()
            .filter_map(|s| self.text[search_from..].find(s.as_str()))
            .min();
        if let Some(at) = stop {
            let end = (search_from + at).max(self.sent);
            let piece = self.text[self.sent..end].to_string();
            self.sent = self.text.len();
            return Ok(Piece {
                text: piece,
                stopped: true,
            });
        }
        let end = floor_boundary(&self.text, self.text.len() - self.hold.min(self.text.len()));
        let piece = if end > self.sent {
            let p = self.text[self.sent..end].to_string();
            self.sent = end;
            p
        } else {
            String::new()
        };
        Ok(Piece {
            text: piece,
            stopped: false,
        })
    }

    /// The text not yet handed out, at the end of the sequence (nothing is held after it).
    pub fn finish(&mut self) -> String {
        let rest = self.text[self.sent..].to_string();
        self.sent = self.text.len();
        rest
    }
}

/// The largest char boundary of `s` at or below `at`.
fn floor_boundary(s: &str, mut at: usize) -> usize {
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A decoder of tokens that are byte strings: token `i` is `vocab[i]`, bad UTF-8 shown as
    /// U+FFFD as a byte-level decoder shows it.
    fn decoder<'a>(vocab: &'a [&'a [u8]]) -> impl Fn(&[i64]) -> Result<String, ()> + 'a {
        move |ids: &[i64]| {
            let bytes: Vec<u8> = ids
                .iter()
                .flat_map(|&i| vocab[i as usize].to_vec())
                .collect();
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        }
    }

    fn run(stops: &[&str], vocab: &[&[u8]], ids: &[i64]) -> (Vec<String>, String, bool) {
        let mut stream = TextStream::new(stops.iter().map(|s| s.to_string()).collect());
        let decode = decoder(vocab);
        let mut pieces = Vec::new();
        for &id in ids {
            let piece = stream.push(id, &decode).unwrap();
            pieces.push(piece.text);
            if piece.stopped {
                return (pieces, String::new(), true);
            }
        }
        let rest = stream.finish();
        (pieces, rest, false)
    }

    #[test]
    fn a_character_split_across_tokens_waits_for_its_last_byte() {
        // "é" is C3 A9.
        let vocab: [&[u8]; 3] = [b"caf", b"\xC3", b"\xA9!"];
        let (pieces, rest, stopped) = run(&[], &vocab, &[0, 1, 2]);
        assert_eq!(pieces, ["caf", "", "é!"]);
        assert_eq!((rest.as_str(), stopped), ("", false));
    }

    #[test]
    fn a_stop_string_is_cut_with_what_follows_and_never_sent_in_part() {
        let vocab: [&[u8]; 5] = [b"Hello", b" wor", b"ld\nUs", b"er: hi", b"\nU"];
        let (pieces, _, stopped) = run(&["\nUser:"], &vocab, &[0, 1, 2, 3]);
        assert!(stopped);
        // Nothing of "\nUs" went out before the stop was known.
        assert_eq!(pieces.concat(), "Hello world");
        assert!(pieces.iter().all(|p| !p.contains('\n')));
        // A held start that turns out not to be a stop goes out at the end.
        let (pieces, rest, stopped) = run(&["\nUser:"], &vocab, &[0, 4]);
        assert!(!stopped);
        assert_eq!(pieces.concat() + &rest, "Hello\nU");
        // The earliest of several stops wins; a stop at the very start gives no text.
        let (pieces, _, stopped) = run(&["ld", "wor"], &vocab, &[1, 2]);
        assert!(stopped);
        assert_eq!(pieces.concat(), " ");
    }
}
