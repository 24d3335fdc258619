//! A minimal PNG writer for the report's timeline: an 8-bit paletted
//! image, its pixel rows in stored (uncompressed) deflate blocks, with
//! the CRC-32 and Adler-32 the format asks for. Enough for a chart; a
//! few hundred kilobytes each.

/// An image of palette indices.
pub struct Image {
    pub width: usize,
    pub height: usize,
    pixels: Vec<u8>,
}

impl Image {
    pub fn new(width: usize, height: usize, background: u8) -> Image {
        Image {
            width,
            height,
            pixels: vec![background; width * height],
        }
    }

    /// Sets a pixel; outside the image, nothing.
    pub fn set(&mut self, x: i64, y: i64, color: u8) {
        if x >= 0 && y >= 0 && (x as usize) < self.width && (y as usize) < self.height {
            self.pixels[y as usize * self.width + x as usize] = color;
        }
    }

    pub fn get(&self, x: usize, y: usize) -> u8 {
        self.pixels[y * self.width + x]
    }

    /// Fills the rectangle [x0, x1) x [y0, y1).
    pub fn fill(&mut self, x0: i64, y0: i64, x1: i64, y1: i64, color: u8) {
        for y in y0..y1 {
            for x in x0..x1 {
                self.set(x, y, color);
            }
        }
    }

    /// The PNG file: `palette` gives each index's RGB.
    pub fn encode(&self, palette: &[[u8; 3]]) -> Vec<u8> {
        let mut file = b"\x89PNG\r\n\x1a\n".to_vec();
        let mut header = Vec::new();
        header.extend((self.width as u32).to_be_bytes());
        header.extend((self.height as u32).to_be_bytes());
        header.extend([8, 3, 0, 0, 0]); // 8 bits, paletted, deflate, no filter, no interlace
        chunk(&mut file, b"IHDR", &header);
        chunk(&mut file, b"PLTE", &palette.concat());
        let mut raw = Vec::with_capacity((self.width + 1) * self.height);
        for row in self.pixels.chunks(self.width) {
            raw.push(0); // no filter
            raw.extend_from_slice(row);
        }
        chunk(&mut file, b"IDAT", &zlib_stored(&raw));
        chunk(&mut file, b"IEND", &[]);
        file
    }
}

fn chunk(file: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    file.extend((data.len() as u32).to_be_bytes());
    let start = file.len();
    file.extend_from_slice(kind);
    file.extend_from_slice(data);
    let crc = crc32(&file[start..]);
    file.extend(crc.to_be_bytes());
}

/// A zlib stream of stored deflate blocks.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = data.chunks(65_535).collect();
    if blocks.is_empty() {
        out.extend([1, 0, 0, 0xFF, 0xFF]);
    }
    for (index, block) in blocks.iter().enumerate() {
        out.push(u8::from(index + 1 == blocks.len()));
        let length = block.len() as u16;
        out.extend(length.to_le_bytes());
        out.extend((!length).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend(adler32(data).to_be_bytes());
    out
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5_552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= 65_521;
        b %= 65_521;
    }
    (b << 16) | a
}

/// Digits 0-9, 3 x 5 pixels, a row per 3 bits (top first).
const DIGITS: [[u8; 5]; 10] = [
    [7, 5, 5, 5, 7],
    [2, 6, 2, 2, 7],
    [7, 1, 7, 4, 7],
    [7, 1, 7, 1, 7],
    [5, 5, 7, 1, 1],
    [7, 4, 7, 1, 7],
    [7, 4, 7, 5, 7],
    [7, 1, 1, 1, 1],
    [7, 5, 7, 5, 7],
    [7, 5, 7, 1, 7],
];

/// Draws the digits of `text` (others skipped as a space) at (x, y),
/// each pixel `scale` wide.
pub fn draw_digits(image: &mut Image, x: i64, y: i64, text: &str, scale: i64, color: u8) {
    for (index, character) in text.chars().enumerate() {
        let Some(digit) = character.to_digit(10) else {
            continue;
        };
        let left = x + index as i64 * 4 * scale;
        for (row, bits) in DIGITS[digit as usize].iter().enumerate() {
            for column in 0..3 {
                if bits & (4 >> column) != 0 {
                    image.fill(
                        left + column * scale,
                        y + row as i64 * scale,
                        left + (column + 1) * scale,
                        y + (row as i64 + 1) * scale,
                        color,
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_match_known_values_and_the_file_is_well_formed() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        let mut image = Image::new(300, 300, 0);
        image.fill(10, 10, 20, 20, 1);
        let file = image.encode(&[[255, 255, 255], [0, 0, 0]]);
        assert!(file.starts_with(b"\x89PNG\r\n\x1a\n"));
        assert!(file.ends_with(&[0xAE, 0x42, 0x60, 0x82]), "IEND's CRC");
        // Two stored blocks: 301 bytes a row, 300 rows.
        assert!(file.len() > 301 * 300);
    }
}
