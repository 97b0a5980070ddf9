module @jit_step attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<64xf32>, %arg1: tensor<8xf32>, %arg2: tensor<64x64xf32>, %arg3: tensor<64x8xf32>, %arg4: tensor<64xf32>, %arg5: tensor<8xf32>, %arg6: tensor<64x64xf32>, %arg7: tensor<64x8xf32>, %arg8: tensor<64xf32>, %arg9: tensor<8xf32>, %arg10: tensor<64x64xf32>, %arg11: tensor<64x8xf32>, %arg12: tensor<64xf32>, %arg13: tensor<8xf32>, %arg14: tensor<64x64xf32>, %arg15: tensor<64x8xf32>, %arg16: tensor<f32>) -> (tensor<64xf32> {jax.result_info = "result[0]['b1']"}, tensor<8xf32> {jax.result_info = "result[0]['b2']"}, tensor<64x64xf32> {jax.result_info = "result[0]['w1']"}, tensor<64x8xf32> {jax.result_info = "result[0]['w2']"}, tensor<64xf32> {jax.result_info = "result[1]['b1']"}, tensor<8xf32> {jax.result_info = "result[1]['b2']"}, tensor<64x64xf32> {jax.result_info = "result[1]['w1']"}, tensor<64x8xf32> {jax.result_info = "result[1]['w2']"}, tensor<64xf32> {jax.result_info = "result[2]['b1']"}, tensor<8xf32> {jax.result_info = "result[2]['b2']"}, tensor<64x64xf32> {jax.result_info = "result[2]['w1']"}, tensor<64x8xf32> {jax.result_info = "result[2]['w2']"}, tensor<f32> {jax.result_info = "result[3]"}) {
    %0 = stablehlo.abs %arg4 : tensor<64xf32>
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %1 = stablehlo.reduce(%0 init: %cst) applies stablehlo.maximum across dimensions = [0] : (tensor<64xf32>, tensor<f32>) -> tensor<f32>
    %2 = stablehlo.abs %arg5 : tensor<8xf32>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %3 = stablehlo.reduce(%2 init: %cst_0) applies stablehlo.maximum across dimensions = [0] : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
    %4 = stablehlo.abs %arg6 : tensor<64x64xf32>
    %cst_1 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %5 = stablehlo.reduce(%4 init: %cst_1) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<64x64xf32>, tensor<f32>) -> tensor<f32>
    %6 = stablehlo.abs %arg7 : tensor<64x8xf32>
    %cst_2 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %7 = stablehlo.reduce(%6 init: %cst_2) applies stablehlo.maximum across dimensions = [0, 1] : (tensor<64x8xf32>, tensor<f32>) -> tensor<f32>
    %8 = stablehlo.broadcast_in_dim %1, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %9 = stablehlo.broadcast_in_dim %3, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %10 = stablehlo.broadcast_in_dim %5, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %11 = stablehlo.broadcast_in_dim %7, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %12 = stablehlo.concatenate %8, %9, %10, %11, dim = 0 : (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<4xf32>
    %cst_3 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %13 = stablehlo.reduce(%12 init: %cst_3) applies stablehlo.maximum across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
    %cst_4 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %14 = stablehlo.divide %cst_4, %13 : tensor<f32>
    %cst_5 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %15 = stablehlo.minimum %cst_5, %14 : tensor<f32>
    %16 = stablehlo.broadcast_in_dim %15, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %17 = stablehlo.multiply %arg4, %16 : tensor<64xf32>
    %18 = stablehlo.broadcast_in_dim %15, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %19 = stablehlo.multiply %arg5, %18 : tensor<8xf32>
    %20 = stablehlo.broadcast_in_dim %15, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
    %21 = stablehlo.multiply %arg6, %20 : tensor<64x64xf32>
    %22 = stablehlo.broadcast_in_dim %15, dims = [] : (tensor<f32>) -> tensor<64x8xf32>
    %23 = stablehlo.multiply %arg7, %22 : tensor<64x8xf32>
    %cst_6 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %24 = stablehlo.add %arg16, %cst_6 : tensor<f32>
    %cst_7 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %25 = stablehlo.broadcast_in_dim %cst_7, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %26 = stablehlo.multiply %25, %arg8 : tensor<64xf32>
    %cst_8 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %27 = stablehlo.broadcast_in_dim %cst_8, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %28 = stablehlo.multiply %27, %17 : tensor<64xf32>
    %29 = stablehlo.add %26, %28 : tensor<64xf32>
    %cst_9 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %30 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %31 = stablehlo.multiply %30, %arg9 : tensor<8xf32>
    %cst_10 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %32 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %33 = stablehlo.multiply %32, %19 : tensor<8xf32>
    %34 = stablehlo.add %31, %33 : tensor<8xf32>
    %cst_11 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %35 = stablehlo.broadcast_in_dim %cst_11, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
    %36 = stablehlo.multiply %35, %arg10 : tensor<64x64xf32>
    %cst_12 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %37 = stablehlo.broadcast_in_dim %cst_12, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
    %38 = stablehlo.multiply %37, %21 : tensor<64x64xf32>
    %39 = stablehlo.add %36, %38 : tensor<64x64xf32>
    %cst_13 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %40 = stablehlo.broadcast_in_dim %cst_13, dims = [] : (tensor<f32>) -> tensor<64x8xf32>
    %41 = stablehlo.multiply %40, %arg11 : tensor<64x8xf32>
    %cst_14 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %42 = stablehlo.broadcast_in_dim %cst_14, dims = [] : (tensor<f32>) -> tensor<64x8xf32>
    %43 = stablehlo.multiply %42, %23 : tensor<64x8xf32>
    %44 = stablehlo.add %41, %43 : tensor<64x8xf32>
    %cst_15 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %45 = stablehlo.broadcast_in_dim %cst_15, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %46 = stablehlo.multiply %45, %arg12 : tensor<64xf32>
    %cst_16 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %47 = stablehlo.broadcast_in_dim %cst_16, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %48 = stablehlo.multiply %47, %17 : tensor<64xf32>
    %49 = stablehlo.multiply %48, %17 : tensor<64xf32>
    %50 = stablehlo.add %46, %49 : tensor<64xf32>
    %cst_17 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %51 = stablehlo.broadcast_in_dim %cst_17, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %52 = stablehlo.multiply %51, %arg13 : tensor<8xf32>
    %cst_18 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %53 = stablehlo.broadcast_in_dim %cst_18, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %54 = stablehlo.multiply %53, %19 : tensor<8xf32>
    %55 = stablehlo.multiply %54, %19 : tensor<8xf32>
    %56 = stablehlo.add %52, %55 : tensor<8xf32>
    %cst_19 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %57 = stablehlo.broadcast_in_dim %cst_19, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
    %58 = stablehlo.multiply %57, %arg14 : tensor<64x64xf32>
    %cst_20 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %59 = stablehlo.broadcast_in_dim %cst_20, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
    %60 = stablehlo.multiply %59, %21 : tensor<64x64xf32>
    %61 = stablehlo.multiply %60, %21 : tensor<64x64xf32>
    %62 = stablehlo.add %58, %61 : tensor<64x64xf32>
    %cst_21 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %63 = stablehlo.broadcast_in_dim %cst_21, dims = [] : (tensor<f32>) -> tensor<64x8xf32>
    %64 = stablehlo.multiply %63, %arg15 : tensor<64x8xf32>
    %cst_22 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %65 = stablehlo.broadcast_in_dim %cst_22, dims = [] : (tensor<f32>) -> tensor<64x8xf32>
    %66 = stablehlo.multiply %65, %23 : tensor<64x8xf32>
    %67 = stablehlo.multiply %66, %23 : tensor<64x8xf32>
    %68 = stablehlo.add %64, %67 : tensor<64x8xf32>
    %cst_23 = stablehlo.constant dense<0.899999976> : tensor<f32>
    %69 = stablehlo.power %cst_23, %24 : tensor<f32>
    %cst_24 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %70 = stablehlo.subtract %cst_24, %69 : tensor<f32>
    %cst_25 = stablehlo.constant dense<9.990000e-01> : tensor<f32>
    %71 = stablehlo.power %cst_25, %24 : tensor<f32>
    %cst_26 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %72 = stablehlo.subtract %cst_26, %71 : tensor<f32>
    %73 = stablehlo.broadcast_in_dim %70, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %74 = stablehlo.divide %29, %73 : tensor<64xf32>
    %cst_27 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %75 = stablehlo.broadcast_in_dim %cst_27, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %76 = stablehlo.multiply %75, %74 : tensor<64xf32>
    %77 = stablehlo.broadcast_in_dim %72, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %78 = stablehlo.divide %50, %77 : tensor<64xf32>
    %79 = stablehlo.sqrt %78 : tensor<64xf32>
    %cst_28 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %80 = stablehlo.broadcast_in_dim %cst_28, dims = [] : (tensor<f32>) -> tensor<64xf32>
    %81 = stablehlo.add %79, %80 : tensor<64xf32>
    %82 = stablehlo.divide %76, %81 : tensor<64xf32>
    %83 = stablehlo.subtract %arg0, %82 : tensor<64xf32>
    %84 = stablehlo.broadcast_in_dim %70, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %85 = stablehlo.divide %34, %84 : tensor<8xf32>
    %cst_29 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %86 = stablehlo.broadcast_in_dim %cst_29, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %87 = stablehlo.multiply %86, %85 : tensor<8xf32>
    %88 = stablehlo.broadcast_in_dim %72, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %89 = stablehlo.divide %56, %88 : tensor<8xf32>
    %90 = stablehlo.sqrt %89 : tensor<8xf32>
    %cst_30 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %91 = stablehlo.broadcast_in_dim %cst_30, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %92 = stablehlo.add %90, %91 : tensor<8xf32>
    %93 = stablehlo.divide %87, %92 : tensor<8xf32>
    %94 = stablehlo.subtract %arg1, %93 : tensor<8xf32>
    %95 = stablehlo.broadcast_in_dim %70, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
    %96 = stablehlo.divide %39, %95 : tensor<64x64xf32>
    %cst_31 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %97 = stablehlo.broadcast_in_dim %cst_31, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
    %98 = stablehlo.multiply %97, %96 : tensor<64x64xf32>
    %99 = stablehlo.broadcast_in_dim %72, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
    %100 = stablehlo.divide %62, %99 : tensor<64x64xf32>
    %101 = stablehlo.sqrt %100 : tensor<64x64xf32>
    %cst_32 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %102 = stablehlo.broadcast_in_dim %cst_32, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
    %103 = stablehlo.add %101, %102 : tensor<64x64xf32>
    %104 = stablehlo.divide %98, %103 : tensor<64x64xf32>
    %105 = stablehlo.subtract %arg2, %104 : tensor<64x64xf32>
    %106 = stablehlo.broadcast_in_dim %70, dims = [] : (tensor<f32>) -> tensor<64x8xf32>
    %107 = stablehlo.divide %44, %106 : tensor<64x8xf32>
    %cst_33 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %108 = stablehlo.broadcast_in_dim %cst_33, dims = [] : (tensor<f32>) -> tensor<64x8xf32>
    %109 = stablehlo.multiply %108, %107 : tensor<64x8xf32>
    %110 = stablehlo.broadcast_in_dim %72, dims = [] : (tensor<f32>) -> tensor<64x8xf32>
    %111 = stablehlo.divide %68, %110 : tensor<64x8xf32>
    %112 = stablehlo.sqrt %111 : tensor<64x8xf32>
    %cst_34 = stablehlo.constant dense<9.99999993E-9> : tensor<f32>
    %113 = stablehlo.broadcast_in_dim %cst_34, dims = [] : (tensor<f32>) -> tensor<64x8xf32>
    %114 = stablehlo.add %112, %113 : tensor<64x8xf32>
    %115 = stablehlo.divide %109, %114 : tensor<64x8xf32>
    %116 = stablehlo.subtract %arg3, %115 : tensor<64x8xf32>
    return %83, %94, %105, %116, %29, %34, %39, %44, %50, %56, %62, %68, %24 : tensor<64xf32>, tensor<8xf32>, tensor<64x64xf32>, tensor<64x8xf32>, tensor<64xf32>, tensor<8xf32>, tensor<64x64xf32>, tensor<64x8xf32>, tensor<64xf32>, tensor<8xf32>, tensor<64x64xf32>, tensor<64x8xf32>, tensor<f32>
  }
}
