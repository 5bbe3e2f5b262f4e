//! The drill client's WebSocket streams (RFC 6455). Hand-written over a TCP stream: the client
//! only reads text or binary messages, answers pings and close frames, and sends nothing else,
//! so a library's machinery is not needed. A close frame (1001 "going away" from a server that
//! drains) is a close; a connection lost mid-stream is a cut.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::calls::StreamEnding;
use super::stream::{LARGEST_MESSAGE, STALL, timed_out};

/// RFC 6455's example key: the server's accept value is not checked, so any valid key does.
const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

pub type Socket = BufReader<TcpStream>;

/// Connects and upgrades; an answer other than 101 is an error.
pub async fn open(address: SocketAddr, host: &str, path: &str) -> std::io::Result<Socket> {
    let mut stream = tokio::time::timeout(STALL, TcpStream::connect(address))
        .await
        .map_err(timed_out)??;
    let _ = stream.set_nodelay(true);
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\nUser-Agent: meshlife-drill\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut socket = BufReader::new(stream);
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 16 * 1024 {
            return Err(std::io::Error::other("an oversized upgrade answer"));
        }
        let byte = tokio::time::timeout(STALL, socket.read_u8())
            .await
            .map_err(timed_out)??;
        head.push(byte);
    }
    let status = String::from_utf8_lossy(&head);
    if status.split_whitespace().nth(1) != Some("101") {
        return Err(std::io::Error::other(format!(
            "no upgrade: {}",
            status.lines().next().unwrap_or("")
        )));
    }
    Ok(socket)
}

/// Reads frames until the stream ends; counts data messages in `messages`.
pub async fn read_until_end(socket: &mut Socket, messages: &mut u64) -> StreamEnding {
    loop {
        let frame = match tokio::time::timeout(STALL, read_frame(socket)).await {
            Err(_) => return StreamEnding::Stalled,
            Ok(Err(error)) => return StreamEnding::Cut(cut_reason(&error)),
            Ok(Ok(frame)) => frame,
        };
        match frame.opcode {
            0x8 => {
                let code = frame
                    .payload
                    .get(..2)
                    .map_or(1005, |code| u16::from_be_bytes([code[0], code[1]]));
                // The closing handshake: answer with a close of the same code.
                let _ = socket.get_mut().write_all(&close_frame(code)).await;
                return StreamEnding::Closed(code);
            }
            0x9 if socket
                .get_mut()
                .write_all(&masked_frame(0xA, &frame.payload))
                .await
                .is_err() =>
            {
                return StreamEnding::Cut("the pong could not be written".into());
            }
            0x9 => {}
            0xA => {}
            // A final frame of a message (text, binary, or the last continuation).
            _ if frame.fin => *messages += 1,
            _ => {}
        }
    }
}

struct Frame {
    fin: bool,
    opcode: u8,
    payload: Vec<u8>,
}

async fn read_frame(socket: &mut Socket) -> std::io::Result<Frame> {
    let first = socket.read_u8().await?;
    let second = socket.read_u8().await?;
    let length = match second & 0x7f {
        126 => u64::from(socket.read_u16().await?),
        127 => socket.read_u64().await?,
        short => u64::from(short),
    };
    if length > LARGEST_MESSAGE {
        return Err(std::io::Error::other(format!(
            "a frame of {length} bytes, more than the client reads"
        )));
    }
    let mask = if second & 0x80 != 0 {
        let mut key = [0u8; 4];
        socket.read_exact(&mut key).await?;
        Some(key)
    } else {
        None
    };
    let mut payload = vec![0u8; length as usize];
    socket.read_exact(&mut payload).await?;
    if let Some(key) = mask {
        for (index, byte) in payload.iter_mut().enumerate() {
            *byte ^= key[index % 4];
        }
    }
    Ok(Frame {
        fin: first & 0x80 != 0,
        opcode: first & 0x0f,
        payload,
    })
}

/// A client frame, masked as RFC 6455 requires of clients (the key need not be secret here:
/// the drill's frames are control frames of at most 125 bytes).
fn masked_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let key = [0x6d, 0x6c, 0x64, 0x72];
    let payload = &payload[..payload.len().min(125)];
    let mut frame = vec![0x80 | opcode, 0x80 | payload.len() as u8];
    frame.extend_from_slice(&key);
    frame.extend(
        payload
            .iter()
            .enumerate()
            .map(|(index, byte)| byte ^ key[index % 4]),
    );
    frame
}

pub fn close_frame(code: u16) -> Vec<u8> {
    masked_frame(0x8, &code.to_be_bytes())
}

fn cut_reason(error: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match error.kind() {
        ErrorKind::UnexpectedEof => "closed without a close frame".into(),
        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe => {
            "reset".into()
        }
        _ => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_frames_are_masked_and_say_their_length() {
        let frame = close_frame(1001);
        assert_eq!(frame[0], 0x88);
        assert_eq!(frame[1], 0x80 | 2);
        let key = &frame[2..6];
        let code = [frame[6] ^ key[0], frame[7] ^ key[1]];
        assert_eq!(u16::from_be_bytes(code), 1001);
    }
}
