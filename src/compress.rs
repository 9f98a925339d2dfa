//! Response compression ([`Compress`]): a response body goes out compressed when the request
//! asks for it (`Accept-Encoding`) and the body is large enough to gain from it.
//!
//! Negotiation is actix-web's own (`AcceptEncoding::negotiate` over the encodings actix-http
//! is built with here: zstd, brotli, gzip, deflate, and identity), and so is the encoder
//! (`actix_http::encoding::Encoder`, fast levels). What differs from actix-web's `Compress`
//! middleware:
//!
//! - A body whose size is known and under the server's `--compress-min-bytes` (default
//!   [`DEFAULT_MIN_BODY`]) goes out as it is, and 0 turns compression of answers off. Python's
//!   `requests`, under hbase-rest-py and starbase, sends `Accept-Encoding: gzip, deflate` on
//!   every request, whether or not its user wants compression. A deflate stream costs the
//!   server its set-up (a few hundred KB of state zeroed per response) and then ~100 MB/s of
//!   one core: a one-cell GET of a 1,000-byte value compressed ran at 0.28x the same GET
//!   uncompressed, and saved a quarter of 1.4 KB (benches/README.md, "The figures").
//!   Compression pays where the network is slower than that, across a WAN; within a data
//!   centre it costs more than it saves, and `--compress-min-bytes 0` is the setting there.
//! - A request without `Accept-Encoding` costs one header lookup: nothing is parsed, neither
//!   its headers nor the response's `Content-Type`.
//!
//! # Invariants
//! 1. A body is compressed only with an encoding the request accepts. A request that accepts
//!    none of the offered ones (identity refused too) gets the body as it is, as RFC 9110
//!    (12.5.3) asks, where actix-web's `Compress` answers 406.
//! 2. A response that already carries `Content-Encoding`, or has no body, is never encoded
//!    (the encoder's own rule); neither are images other than SVG, nor video (actix-web's rule:
//!    they are compressed already).
//! 3. A compressed response carries `Vary: accept-encoding`; one sent as it is does not vary
//!    with the request's `Accept-Encoding` and says nothing.

use actix_http::encoding::Encoder;
use actix_web::body::{BodySize, MessageBody};
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::header::{self, AcceptEncoding, ContentEncoding, Encoding, HeaderValue};
use actix_web::mime;
use actix_web::{Error, HttpMessage};
use futures::future::{ready, Ready};
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// Bodies of known size under this many bytes are sent uncompressed unless the server says
/// otherwise: 2 KiB, a common minimum of web servers' gzip settings. Below it a compressed
/// body rarely saves a TCP segment, and the codec's set-up costs more than the bytes it saves.
pub const DEFAULT_MIN_BODY: u64 = 2048;

/// The encodings offered, most preferred first when the client weighs them equally (the
/// order of actix-web's `Compress`).
const OFFERED: [Encoding; 5] = [
    Encoding::identity(),
    Encoding::brotli(),
    Encoding::gzip(),
    Encoding::deflate(),
    Encoding::zstd(),
];

/// The middleware; see the module doc.
#[derive(Debug, Clone, Copy)]
pub struct Compress {
    /// Bodies of known size under this are sent as they are; `None`: nothing is compressed.
    min_body: Option<u64>,
}

impl Compress {
    /// Compresses bodies of at least `min_body` bytes (or of unknown size) for requests that
    /// accept it; `0`: never compresses.
    pub fn new(min_body: u64) -> Compress {
        Compress {
            min_body: (min_body > 0).then_some(min_body),
        }
    }
}

impl Default for Compress {
    fn default() -> Compress {
        Compress::new(DEFAULT_MIN_BODY)
    }
}

impl<S, B> Transform<S, ServiceRequest> for Compress
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error>,
    B: MessageBody,
{
    type Response = ServiceResponse<Encoder<B>>;
    type Error = Error;
    type Transform = CompressService<S>;
    type InitError = ();
    type Future = Ready<Result<Self::Transform, Self::InitError>>;

    fn new_transform(&self, service: S) -> Self::Future {
        ready(Ok(CompressService {
            service,
            min_body: self.min_body,
        }))
    }
}

/// The service [`Compress`] builds.
pub struct CompressService<S> {
    service: S,
    min_body: Option<u64>,
}

impl<S, B> Service<ServiceRequest> for CompressService<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error>,
    B: MessageBody,
{
    type Response = ServiceResponse<Encoder<B>>;
    type Error = Error;
    type Future = CompressResponse<S::Future>;

    actix_web::dev::forward_ready!(service);

    fn call(&self, req: ServiceRequest) -> Self::Future {
        let encoding = match self.min_body {
            // An unparsable header, or one that accepts none of the offered encodings, gets the
            // body as it is (RFC 9110, 12.5.3).
            Some(_) if req.headers().contains_key(header::ACCEPT_ENCODING) => {
                let accepted = req.get_header::<AcceptEncoding>();
                match accepted.and_then(|a| a.negotiate(OFFERED.iter())) {
                    Some(Encoding::Known(encoding)) => encoding,
                    _ => ContentEncoding::Identity,
                }
            }
            _ => ContentEncoding::Identity,
        };
        CompressResponse {
            inner: self.service.call(req),
            encoding,
            min_body: self.min_body.unwrap_or(u64::MAX),
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`CompressService`].
    pub struct CompressResponse<F> {
        #[pin]
        inner: F,
        encoding: ContentEncoding,
        min_body: u64,
    }
}

impl<F, B> Future for CompressResponse<F>
where
    F: Future<Output = Result<ServiceResponse<B>, Error>>,
    B: MessageBody,
{
    type Output = Result<ServiceResponse<Encoder<B>>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let res = ready!(this.inner.poll(cx))?;
        let (asked, min_body) = (*this.encoding, *this.min_body);
        Poll::Ready(Ok(res.map_body(move |head, body| {
            let encoding = if asked == ContentEncoding::Identity
                || matches!(body.size(), BodySize::Sized(n) if n < min_body)
                || !compressible(head.headers.get(header::CONTENT_TYPE))
            {
                ContentEncoding::Identity
            } else {
                asked
            };
            Encoder::response(encoding, head, body)
        })))
    }
}

/// Whether a body of this type may gain from compression: all but images (SVG aside) and
/// video, which are compressed already.
fn compressible(content_type: Option<&HeaderValue>) -> bool {
    let Some(mime) = content_type
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<mime::Mime>().ok())
    else {
        return true;
    };
    match mime.type_() {
        mime::IMAGE => mime.subtype() == mime::SVG,
        mime::VIDEO => false,
        _ => true,
    }
}
