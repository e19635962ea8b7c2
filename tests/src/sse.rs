//! Server-sent events as the trade-updates stream sends them, read from chunks of bytes: the
//! parser the API tests, the bench and the chaos driver read streams with.

/// What a stream carries: a message (its `id:`, `event:` and `data:` lines up to a blank line)
/// or a comment line (`:`, the heartbeat).
#[derive(Debug, PartialEq)]
pub enum Item {
    Message {
        id: Option<String>,
        event: String,
        data: String,
    },
    Comment,
}

/// The lines of a server-sent event stream, as they arrive in chunks that may cut a line.
#[derive(Debug, Default)]
pub struct Parser {
    line: Vec<u8>,
    id: Option<String>,
    event: Option<String>,
    data: Option<String>,
    last_event_id: Option<String>,
    blocks: usize,
}

impl Parser {
    /// The items `bytes` completes, into `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<Item>) {
        for &byte in bytes {
            if byte == b'\n' {
                let line = std::mem::take(&mut self.line);
                self.line(&line, out);
            } else {
                self.line.push(byte);
            }
        }
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<Item>) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            // The blank line ends a message; one without data is no message, but its id is
            // still the stream's last event id (as an `EventSource` keeps it).
            let (id, event) = (self.id.take(), self.event.take());
            self.blocks += 1;
            if id.is_some() {
                self.last_event_id.clone_from(&id);
            }
            if let Some(data) = self.data.take() {
                out.push(Item::Message {
                    id,
                    event: event.unwrap_or_else(|| "message".to_owned()),
                    data,
                });
            }
            return;
        }
        let text = String::from_utf8_lossy(line);
        if text.starts_with(':') {
            out.push(Item::Comment);
            return;
        }
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text.as_ref(), ""),
        };
        match field {
            "id" => self.id = Some(value.to_owned()),
            "event" => self.event = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
    }

    /// The id of the last message ended, with data or without (a stream's position).
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_event_id.as_deref()
    }

    /// Blank lines so far: each ends a message (with data or without) or follows a comment.
    pub fn blocks(&self) -> usize {
        self.blocks
    }
}

#[cfg(test)]
mod tests {
    use super::{Item, Parser};

    fn parse(chunks: &[&str]) -> Vec<Item> {
        let mut parser = Parser::default();
        let mut items = Vec::new();
        for chunk in chunks {
            parser.feed(chunk.as_bytes(), &mut items);
        }
        items
    }

    #[test]
    fn messages_and_heartbeats_across_chunks() {
        let items = parse(&[
            "id: 41\nevent: new\ndata: {\"order\":",
            "{\"id\":\"a\"}}\n\n:\n\nid: 42\r\nevent: fill\r\ndata: x\r\ndata: y\r\n\r\n",
        ]);
        assert_eq!(
            items,
            [
                Item::Message {
                    id: Some("41".to_owned()),
                    event: "new".to_owned(),
                    data: r#"{"order":{"id":"a"}}"#.to_owned(),
                },
                Item::Comment,
                Item::Message {
                    id: Some("42".to_owned()),
                    event: "fill".to_owned(),
                    data: "x\ny".to_owned(),
                },
            ]
        );
    }

    #[test]
    fn a_message_without_data_is_none() {
        assert_eq!(parse(&["id: 7\nevent: new\n\n"]), []);
    }

    #[test]
    fn a_message_without_data_moves_the_last_event_id() {
        let mut parser = Parser::default();
        let mut items = Vec::new();
        parser.feed(b"id: 7\n", &mut items);
        assert_eq!((parser.last_event_id(), parser.blocks()), (None, 0));
        parser.feed(b"\n", &mut items);
        assert!(items.is_empty());
        assert_eq!((parser.last_event_id(), parser.blocks()), (Some("7"), 1));
    }
}
