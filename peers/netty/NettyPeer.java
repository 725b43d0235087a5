import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpRequest;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.QueryStringDecoder;

/**
 * The engine under WebFlux: a Netty 4.1 HTTP server whose {@code /delay}
 * handler schedules its response on the connection's event loop instead of
 * blocking (what {@code Mono.delay} does under WebFlux), then answers
 * {@code {"success":true}}; {@code /test} answers "works". Event loop threads:
 * Netty's default, twice the cores.
 *
 * <pre>java -cp ... NettyPeer [--listen HOST:PORT]</pre>
 *
 * Prints {@code listening on http://HOST:PORT} once it accepts (port 0 picks
 * a free one), and stops on SIGTERM.
 */
public final class NettyPeer {
    static final long DEFAULT_MS = 5000;
    static final long MAX_MS = 600_000;

    public static void main(String[] args) throws Exception {
        Listen listen = Listen.parse(args, "NettyPeer");
        EventLoopGroup boss = new NioEventLoopGroup(1);
        EventLoopGroup workers = new NioEventLoopGroup();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            boss.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
            workers.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
        }));
        ServerBootstrap bootstrap = new ServerBootstrap()
            .group(boss, workers)
            .channel(NioServerSocketChannel.class)
            .childHandler(new ChannelInitializer<SocketChannel>() {
                @Override
                protected void initChannel(SocketChannel channel) {
                    channel.pipeline()
                        .addLast(new HttpServerCodec())
                        .addLast(new HttpObjectAggregator(8192))
                        .addLast(new Handler());
                }
            });
        Channel server = bootstrap.bind(listen.host, listen.port).sync().channel();
        InetSocketAddress bound = (InetSocketAddress) server.localAddress();
        System.out.println("listening on http://" + listen.host + ":" + bound.getPort());
        System.out.flush();
        server.closeFuture().sync();
    }

    static final class Handler extends SimpleChannelInboundHandler<FullHttpRequest> {
        @Override
        protected void channelRead0(ChannelHandlerContext ctx, FullHttpRequest request) {
            boolean keepAlive = HttpUtil.isKeepAlive(request);
            QueryStringDecoder uri = new QueryStringDecoder(request.uri());
            if (!request.method().equals(HttpMethod.GET) && !request.method().equals(HttpMethod.HEAD)) {
                send(ctx, HttpResponseStatus.METHOD_NOT_ALLOWED, "application/json",
                    "{\"error\":\"use GET\"}", keepAlive);
                return;
            }
            switch (uri.path()) {
                case "/test":
                    send(ctx, HttpResponseStatus.OK, "text/plain; charset=utf-8", "works", keepAlive);
                    return;
                case "/delay":
                    long ms = requestedMs(uri.parameters().get("ms"));
                    if (ms < 0) {
                        send(ctx, HttpResponseStatus.BAD_REQUEST, "application/json",
                            "{\"error\":\"ms must be an integer from 0 to " + MAX_MS + "\"}", keepAlive);
                        return;
                    }
                    // The event loop is free meanwhile: nothing blocks.
                    ctx.executor().schedule(
                        () -> send(ctx, HttpResponseStatus.OK, "application/json", "{\"success\":true}", keepAlive),
                        ms, TimeUnit.MILLISECONDS);
                    return;
                default:
                    send(ctx, HttpResponseStatus.NOT_FOUND, "application/json",
                        "{\"error\":\"no such path\"}", keepAlive);
            }
        }

        /** The wait asked for, or -1 if it is not a valid one. */
        static long requestedMs(List<String> values) {
            if (values == null || values.isEmpty()) {
                return DEFAULT_MS;
            }
            try {
                long ms = Long.parseLong(values.get(0).trim());
                return ms >= 0 && ms <= MAX_MS ? ms : -1;
            } catch (NumberFormatException e) {
                return -1;
            }
        }

        static void send(ChannelHandlerContext ctx, HttpResponseStatus status, String type, String body,
                         boolean keepAlive) {
            FullHttpResponse response = new DefaultFullHttpResponse(
                HttpVersion.HTTP_1_1, status, Unpooled.copiedBuffer(body, StandardCharsets.UTF_8));
            response.headers().set(HttpHeaderNames.CONTENT_TYPE, type);
            HttpUtil.setContentLength(response, response.content().readableBytes());
            if (keepAlive) {
                response.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.KEEP_ALIVE);
                ctx.writeAndFlush(response);
            } else {
                ctx.writeAndFlush(response).addListener(ChannelFutureListener.CLOSE);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();
        }
    }
}
